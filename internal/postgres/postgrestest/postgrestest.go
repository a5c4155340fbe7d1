// Package postgrestest gives each test its own fresh database, cloned from a
// template that has every migration applied (pgtestdb), so tests run in
// parallel against a real PostgreSQL.
package postgrestest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"testing"

	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/migrations"
	"github.com/jackc/pgx/v5/stdlib" // also the database/sql driver "pgx" for pgtestdb
	"github.com/peterldowns/pgtestdb"
	"github.com/pressly/goose/v3"
)

// DefaultURL is the server tests use unless TEST_DATABASE_URL says otherwise.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerConfig describes the server per-test databases are created on.
func ServerConfig(t testing.TB) pgtestdb.Config {
	raw := os.Getenv("TEST_DATABASE_URL")
	if raw == "" {
		raw = DefaultURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	pw, _ := u.User.Password()
	opts := u.Query()
	if opts.Get("sslmode") == "" {
		opts.Set("sslmode", "disable")
	}
	return pgtestdb.Config{
		DriverName: "pgx", Host: u.Hostname(), Port: u.Port(), User: u.User.Username(),
		Password: pw, Database: "postgres", Options: opts.Encode(),
	}
}

// URL creates a fresh migrated database for t and returns its URL. It is
// dropped when the test passes.
func URL(t testing.TB) string {
	t.Helper()
	return pgtestdb.Custom(t, ServerConfig(t), migrator{}).URL()
}

// New returns an open pool on a fresh migrated database.
func New(t testing.TB) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), URL(t))
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

// migrator applies the embedded goose migrations; its hash names the
// template, so a changed migration builds a new template.
type migrator struct{}

func (migrator) Hash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	fmt.Fprintf(h, "river:%d", postgres.RiverMigrations())
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

func (migrator) Migrate(ctx context.Context, db *sql.DB, _ pgtestdb.Config) error {
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		return err
	}
	if _, err = p.Up(ctx); err != nil {
		return err
	}
	// River's tables too, as postgres.Migrate does.
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		return postgres.MigrateRiver(ctx, dc.(*stdlib.Conn).Conn())
	})
}
