package postgres_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/jackc/pgx/v5"
)

var (
	stubColumn = regexp.MustCompile(`(?m)^\s+(\w+) (\w+)( NOT NULL| PRIMARY KEY)?`)
	stubLabel  = regexp.MustCompile(`'(\w+)'`)
)

// TestRiverSchema: what riverschema/ tells sqlc about River's job table is
// what River's migrations create, column by column, with the states of
// its enum.
func TestRiverSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := os.ReadFile("riverschema/river_job.sql")
	if err != nil {
		t.Fatal(err)
	}
	enum, table, _ := strings.Cut(string(b), "CREATE TABLE")
	conn, err := pgx.Connect(ctx, postgrestest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	udt := map[string]string{"bigint": "int8"}
	for _, m := range stubColumn.FindAllStringSubmatch(table, -1) {
		want := m[2]
		if u, ok := udt[want]; ok {
			want = u
		}
		var got, nullable string
		err := conn.QueryRow(ctx, `SELECT udt_name, is_nullable FROM information_schema.columns
			WHERE table_name = 'river_job' AND column_name = $1`, m[1]).Scan(&got, &nullable)
		if err != nil {
			t.Fatalf("river_job.%s: %v", m[1], err)
		}
		if got != want || (nullable == "NO") != (m[3] != "") {
			t.Errorf("river_job.%s: migrated %s nullable %s, described %s%s", m[1], got, nullable, m[2], m[3])
		}
	}
	var labels []string
	for _, m := range stubLabel.FindAllStringSubmatch(enum, -1) {
		labels = append(labels, m[1])
	}
	rows, err := conn.Query(ctx, `SELECT unnest(enum_range(NULL::river_job_state))::text`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(labels)
	slices.Sort(got)
	if !slices.Equal(got, labels) {
		t.Errorf("river_job_state: migrated %v, described %v", got, labels)
	}
}
