package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// operators create prints the token once and stores only its hash; list
// prints no token; a taken name and a second disable are refused.
func TestOperatorsCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := postgrestest.URL(t)
	getenv := env("DATABASE_URL", url)
	run1 := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, args, getenv, &stdout, &stderr)
		return stdout.String(), err
	}
	out, err := run1("operators", "create", "--name", "Eva Lima")
	var op struct{ ID, Name, Token string }
	if err != nil || json.Unmarshal([]byte(out), &op) != nil || op.Name != "Eva Lima" || !strings.HasPrefix(op.Token, "op_") {
		t.Fatalf("operators create: %q %v", out, err)
	}
	if _, err := run1("operators", "create", "--name", "eva lima"); err == nil {
		t.Fatal("a second operator of the same name was created")
	}
	if _, err := run1("operators", "create", "--name", " "); err == nil || !isUsageError(err) {
		t.Fatalf("a blank name: %v, want a usage error", err)
	}
	out, err = run1("operators", "list")
	if err != nil || !strings.Contains(out, `"name":"Eva Lima"`) || strings.Contains(out, op.Token) || strings.Contains(out, "token") {
		t.Fatalf("operators list: %q %v", out, err)
	}
	var stored int
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM console_operators WHERE token_hash = sha256($1::bytea)`, []byte(op.Token)).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("the token's SHA-256 stored %d times (%v), want 1", stored, err)
	}
	if _, err := run1("operators", "disable", "--name", "EVA LIMA"); err != nil {
		t.Fatal(err)
	}
	if _, err := run1("operators", "disable", "--name", "Eva Lima"); err == nil {
		t.Fatal("disabling a disabled operator succeeded")
	}
	if out, _ := run1("operators", "list"); !strings.Contains(out, `"disabled_at"`) {
		t.Fatalf("list after disable: %q", out)
	}
}
