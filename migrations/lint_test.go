package migrations

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// grandfatheredThrough is the last migration written before these rules
// were enforced. Those files have shipped and run on every database; they
// are never edited, so the lint reads only the ones after it.
const grandfatheredThrough = 33

var (
	versionRe     = regexp.MustCompile(`^(\d+)_.*\.sql$`)
	commentRe     = regexp.MustCompile(`(?m)--.*$`)
	createTableRe = regexp.MustCompile(`(?i)\bcreate\s+(?:unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?([a-z_][a-z0-9_.]*)`)
	createIndexRe = regexp.MustCompile(`(?i)\bcreate\s+(?:unique\s+)?index\s+(concurrently\s+)?(?:if\s+not\s+exists\s+)?(?:[a-z_][a-z0-9_]*\s+)?on\s+(?:only\s+)?([a-z_][a-z0-9_.]*)`)
	setLockRe     = regexp.MustCompile(`(?i)\bset\s+(?:local\s+|session\s+)?lock_timeout\b`)
	dropColumnRe  = regexp.MustCompile(`(?i)\bdrop\s+column\s+(?:if\s+exists\s+)?([a-z_][a-z0-9_]*)`)
	dropTableRe   = regexp.MustCompile(`(?i)\bdrop\s+table\s+(?:if\s+exists\s+)?([a-z_][a-z0-9_.]*)`)
	renameRe      = regexp.MustCompile(`(?i)\balter\s+table\b[^;]*\brename\b`)
	// contractRe is the marker of a contract step: the expand migration
	// whose release stopped reading what this one drops, and why.
	contractRe = regexp.MustCompile(`(?m)^--\s*\+contract\s+expand=(\d+)\s+\S`)
)

// migration is one file split into its goose sections, comments removed
// from the SQL (the marker lines are read from raw).
type migration struct {
	name          string
	version       int
	raw           string
	up            string
	noTransaction bool
}

func parse(name, text string) (migration, error) {
	m := versionRe.FindStringSubmatch(name)
	if m == nil {
		return migration{}, fmt.Errorf("%s: not NNNNN_name.sql", name)
	}
	v, _ := strconv.Atoi(m[1])
	_, up, ok := strings.Cut(text, "-- +goose Up")
	if !ok {
		return migration{}, fmt.Errorf("%s: no -- +goose Up", name)
	}
	up, _, _ = strings.Cut(up, "-- +goose Down")
	return migration{name: name, version: v, raw: text, up: commentRe.ReplaceAllString(up, ""),
		noTransaction: strings.Contains(text, "-- +goose NO TRANSACTION")}, nil
}

// lint returns every upgrade rule the migration breaks (docs/upgrading.md):
// an index on an existing table built CONCURRENTLY, outside a transaction,
// under a lock_timeout; no DROP COLUMN, DROP TABLE or RENAME of what
// already exists unless the file is a marked contract step. versions holds
// every migration's number, reads the queries of the current code.
func lint(m migration, versions map[int]bool, queries string) []string {
	var errs []string
	created := map[string]bool{}
	for _, c := range createTableRe.FindAllStringSubmatch(m.up, -1) {
		created[strings.ToLower(c[1])] = true
	}
	for _, c := range createIndexRe.FindAllStringSubmatch(m.up, -1) {
		table := strings.ToLower(c[2])
		if created[table] {
			continue
		}
		if c[1] == "" {
			errs = append(errs, fmt.Sprintf("index on existing table %s without CONCURRENTLY", table))
		}
		if !m.noTransaction {
			errs = append(errs, fmt.Sprintf("index on existing table %s in a transaction: add -- +goose NO TRANSACTION", table))
		}
		if !setLockRe.MatchString(m.up) {
			errs = append(errs, fmt.Sprintf("index on existing table %s without SET lock_timeout", table))
		}
	}
	var drops []string
	for _, d := range dropColumnRe.FindAllStringSubmatch(m.up, -1) {
		drops = append(drops, "DROP COLUMN "+d[1])
	}
	for _, d := range dropTableRe.FindAllStringSubmatch(m.up, -1) {
		if !created[strings.ToLower(d[1])] {
			drops = append(drops, "DROP TABLE "+d[1])
		}
	}
	if renameRe.MatchString(m.up) {
		drops = append(drops, "RENAME")
	}
	if len(drops) == 0 {
		return errs
	}
	c := contractRe.FindStringSubmatch(m.raw)
	if c == nil {
		return append(errs, fmt.Sprintf("%s breaks the running release: expand now, contract in a later release with a -- +contract expand=NNNNN marker",
			strings.Join(drops, ", ")))
	}
	expand, _ := strconv.Atoi(c[1])
	if expand >= m.version || !versions[expand] {
		errs = append(errs, fmt.Sprintf("+contract expand=%s names no earlier migration", c[1]))
	}
	for _, d := range dropColumnRe.FindAllStringSubmatch(m.up, -1) {
		if regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(d[1]) + `\b`).MatchString(queries) {
			errs = append(errs, fmt.Sprintf("drops column %s that internal/postgres/queries still names", d[1]))
		}
	}
	return errs
}

func queriesText(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob("../internal/postgres/queries/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries found: %v", err)
	}
	var b strings.Builder
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(commentRe.ReplaceAll(text, nil))
	}
	return b.String()
}

// TestMigrationsFollowUpgradeRules lints every migration after the
// grandfathered ones.
func TestMigrationsFollowUpgradeRules(t *testing.T) {
	t.Parallel()
	entries, err := fs.Glob(FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var all []migration
	versions := map[int]bool{}
	for _, name := range entries {
		text, err := fs.ReadFile(FS, name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := parse(name, string(text))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, m)
		versions[m.version] = true
	}
	queries := queriesText(t)
	for _, m := range all {
		if m.version <= grandfatheredThrough {
			continue
		}
		for _, e := range lint(m, versions, queries) {
			t.Errorf("%s: %s (docs/upgrading.md)", m.name, e)
		}
	}
}

// TestLintCatches runs the lint on migrations that break each rule and on
// ones that follow them, so a lint that stopped matching would show.
func TestLintCatches(t *testing.T) {
	t.Parallel()
	versions := map[int]bool{37: true, 38: true, 40: true}
	queries := "SELECT id, amount FROM payments"
	cases := []struct {
		name, sql string
		want      []string // substrings of the errors, in order; none: clean
	}{
		{"00040_plain_index.sql", "-- +goose Up\nCREATE INDEX payments_x ON payments (amount);\n-- +goose Down\nDROP INDEX payments_x;\n",
			[]string{"without CONCURRENTLY", "in a transaction", "without SET lock_timeout"}},
		{"00040_concurrent_in_tx.sql", "-- +goose Up\nSET LOCAL lock_timeout = '5s';\nCREATE INDEX CONCURRENTLY payments_x ON payments (amount);\n",
			[]string{"in a transaction"}},
		{"00040_good_index.sql", "-- +goose NO TRANSACTION\n-- +goose Up\nSET lock_timeout = '5s';\nDROP INDEX CONCURRENTLY IF EXISTS payments_x;\n" +
			"CREATE UNIQUE INDEX CONCURRENTLY payments_x\n    ON payments (amount);\nRESET lock_timeout;\n-- +goose Down\nDROP INDEX CONCURRENTLY IF EXISTS payments_x;\n", nil},
		{"00040_new_table.sql", "-- +goose Up\nCREATE TABLE things (id text);\nCREATE INDEX things_id ON things (id);\n-- +goose Down\nDROP TABLE things;\n", nil},
		{"00040_drop_column.sql", "-- +goose Up\nALTER TABLE payments DROP COLUMN legacy;\n", []string{"DROP COLUMN legacy breaks the running release"}},
		{"00040_rename.sql", "-- +goose Up\nALTER TABLE payments RENAME COLUMN amount TO amount_minor;\n", []string{"RENAME breaks"}},
		{"00040_drop_table.sql", "-- +goose Up\nDROP TABLE IF EXISTS legacy_things;\n", []string{"DROP TABLE legacy_things breaks"}},
		{"00040_contract.sql", "-- +goose Up\n-- +contract expand=00037 payments.legacy unread since the release of 00037\nALTER TABLE payments DROP COLUMN legacy;\n", nil},
		{"00040_contract_still_read.sql", "-- +goose Up\n-- +contract expand=00037 done\nALTER TABLE payments DROP COLUMN amount;\n",
			[]string{"still names"}},
		{"00040_contract_of_nothing.sql", "-- +goose Up\n-- +contract expand=00039 gone\nALTER TABLE payments DROP COLUMN legacy;\n",
			[]string{"names no earlier migration"}},
		{"00040_drop_in_down_only.sql", "-- +goose Up\nALTER TABLE payments ADD COLUMN legacy text;\n-- +goose Down\nALTER TABLE payments DROP COLUMN legacy;\n", nil},
		{"00040_commented.sql", "-- +goose Up\n-- a later release may DROP COLUMN legacy\nSELECT 1;\n", nil},
	}
	for _, c := range cases {
		m, err := parse(c.name, c.sql)
		if err != nil {
			t.Fatal(err)
		}
		got := lint(m, versions, queries)
		if len(got) != len(c.want) {
			t.Errorf("%s: lint = %q, want %d errors %q", c.name, got, len(c.want), c.want)
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: error %d = %q, want it to say %q", c.name, i, got[i], w)
			}
		}
	}
}
