package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/acmepay/payments/migrations"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// migrationStatus runs `payments migrate status` on dbURL and returns its
// lines, each split into fields.
func migrationStatus(t *testing.T, dbURL string) [][]string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"migrate", "status"}, env("DATABASE_URL", dbURL), &stdout, &stderr); err != nil {
		t.Fatalf("migrate status: %v\n%s", err, stderr.String())
	}
	var lines [][]string
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		lines = append(lines, strings.Fields(l))
	}
	return lines
}

// `payments migrate status` lists every migration the binary carries as
// pending on an empty database and as applied on a migrated one, and
// names a version applied by a newer release.
func TestMigrateStatus(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v", err)
	}

	t.Run("PendingOnAnEmptyDatabase", func(t *testing.T) {
		t.Parallel()
		lines := migrationStatus(t, emptyDatabase(t))
		if len(lines) != len(files) {
			t.Fatalf("%d lines for %d migrations: %q", len(lines), len(files), lines)
		}
		for i, l := range lines {
			if want := []string{"pending", "-", files[i]}; strings.Join(l, " ") != strings.Join(want, " ") {
				t.Fatalf("line %d = %q, want %q", i, l, want)
			}
		}
	})

	t.Run("AppliedThenNewer", func(t *testing.T) {
		t.Parallel()
		dbURL := postgrestest.URL(t)
		lines := migrationStatus(t, dbURL)
		if len(lines) != len(files) {
			t.Fatalf("%d lines for %d migrations: %q", len(lines), len(files), lines)
		}
		for i, l := range lines {
			if len(l) != 3 || l[0] != "applied" || !strings.HasPrefix(l[1], "20") || l[2] != files[i] {
				t.Fatalf("line %d = %q, want applied <time> %s", i, l, files[i])
			}
		}
		// A newer release's migration, as goose records it.
		db, err := sql.Open("pgx", dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)`); err != nil {
			t.Fatal(err)
		}
		lines = migrationStatus(t, dbURL)
		if got, want := strings.Join(lines[len(lines)-1], " "), fmt.Sprintf("newer - version %d, applied by a newer release", 99999); got != want {
			t.Fatalf("last line = %q, want %q", got, want)
		}
		if len(lines) != len(files)+1 {
			t.Fatalf("%d lines, want %d", len(lines), len(files)+1)
		}
	})
}
