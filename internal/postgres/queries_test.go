package postgres

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	sqlComment  = regexp.MustCompile(`--[^\n]*`)
	queryName   = regexp.MustCompile(`(?m)^-- name: (\w+)`)
	outputAlias = regexp.MustCompile(`(?i)\bAS\s+([a-z_][a-z0-9_]*)(\s*\()?`)
	orderGroup  = regexp.MustCompile(`(?is)\b(?:ORDER|GROUP)\s+BY\b(.*?)(?:\bLIMIT\b|\bOFFSET\b|\bHAVING\b|\bFOR\s+UPDATE\b|\)|;|$)`)
	identifier  = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_.]*`)
)

// shadowingNames returns the bare names an ORDER BY or GROUP BY of query
// uses that the query also defines as an output alias. PostgreSQL reads
// such a name in ORDER BY as the output column and in GROUP BY as the
// input column: `SELECT xid::text AS xid ... ORDER BY xid` sorted the feed
// as text ("1010" < "763").
func shadowingNames(query string) []string {
	query = sqlComment.ReplaceAllString(query, "")
	aliases := map[string]bool{}
	for _, m := range outputAlias.FindAllStringSubmatch(query, -1) {
		if m[2] == "" { // not a CTE's "name AS ("
			aliases[strings.ToLower(m[1])] = true
		}
	}
	var out []string
	for _, m := range orderGroup.FindAllStringSubmatch(query, -1) {
		for _, word := range identifier.FindAllString(m[1], -1) {
			if w := strings.ToLower(word); !strings.Contains(w, ".") && aliases[w] {
				out = append(out, w)
			}
		}
	}
	return out
}

// TestQueriesOrderByNoAlias: no query orders or groups by a bare name its
// SELECT list also defines as an alias; it names the column qualified, or
// the alias is a name of its own.
func TestQueriesOrderByNoAlias(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("queries", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries found: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		names := queryName.FindAllStringSubmatchIndex(src, -1)
		for i, m := range names {
			end := len(src)
			if i+1 < len(names) {
				end = names[i+1][0]
			}
			if bad := shadowingNames(src[m[1]:end]); len(bad) > 0 {
				t.Errorf("%s %s: ORDER BY or GROUP BY names %q, also an output alias: qualify the column (e.xid) or rename the alias (xid_text)",
					f, src[m[2]:m[3]], bad)
			}
		}
	}
}

func TestShadowingNames(t *testing.T) {
	for q, want := range map[string]string{
		"SELECT xid::text AS xid, seq FROM events e WHERE e.xid > $1 ORDER BY xid, seq LIMIT 3":     "[xid]",
		"SELECT e.xid::text AS xid_text, e.seq FROM events e ORDER BY e.xid, e.seq LIMIT 3":         "[]",
		"SELECT status::text AS status, sum(n) AS n FROM (SELECT 1) AS t GROUP BY status":           "[status]",
		"WITH moved AS (DELETE FROM d RETURNING status) SELECT status FROM moved GROUP BY status":   "[]",
		"SELECT kind, count(*)::bigint AS n FROM discrepancies GROUP BY kind ORDER BY kind":         "[]",
		"SELECT a FROM x -- ORDER BY xid AS xid\nORDER BY 1":                                        "[]",
		"SELECT e.created_at AS at FROM events e WHERE true ORDER BY at DESC NULLS LAST FOR UPDATE": "[at]",
	} {
		if got := strings.Join(shadowingNames(q), " "); "["+got+"]" != want {
			t.Errorf("%s: %q, want %s", q, got, want)
		}
	}
}
