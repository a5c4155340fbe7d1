package main

import (
	"bufio"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed sql/paybench.sql
var queriesFile string

//go:embed sql/pgbench_create.sql
var pgbenchCreateScript string

// queries are the named statements of sql/paybench.sql.
var queries = mustParseQueries(queriesFile)

// mustParseQueries splits a file of "-- name: X" sections, sqlc style; the
// comments before a name belong to the previous statement's gap and are
// dropped.
func mustParseQueries(src string) map[string]string {
	out := map[string]string{}
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			out[name] = strings.TrimSuffix(strings.TrimSpace(body.String()), ";")
		}
		body.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "-- name: "); ok {
			flush()
			name = strings.TrimSpace(n)
			continue
		}
		if strings.HasPrefix(line, "--") {
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	flush()
	return out
}

// query returns a named statement with its {{placeholders}} replaced by
// quoted identifiers, or by raw text for {{def}} (definitions read back from
// the catalog).
func query(name string, replace ...string) string {
	q, ok := queries[name]
	if !ok {
		panic(fmt.Sprintf("paybench: no query %q", name))
	}
	for i := 0; i+1 < len(replace); i += 2 {
		v := replace[i+1]
		if replace[i] != "def" {
			v = pgx.Identifier{v}.Sanitize()
		}
		q = strings.ReplaceAll(q, "{{"+replace[i]+"}}", v)
	}
	return q
}
