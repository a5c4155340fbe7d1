package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/peterldowns/pgtestdb"
)

// Behind PgBouncer in transaction mode, `migrate` and `accounts create`
// fail in one line naming MIGRATE_DATABASE_URL when it is not set, and work
// when it names the direct URL.
func TestCommandsThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := emptyDatabase(t)
	pooled := postgrestest.PgBouncer(t, direct)
	create := []string{"accounts", "create", "--name", "Loja", "--stripe-key", "sk_test_pooled0123456789"}

	for _, args := range [][]string{{"migrate"}, create} {
		err := run(ctx, args, env("DATABASE_URL", pooled), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "MIGRATE_DATABASE_URL") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s through PgBouncer without MIGRATE_DATABASE_URL: %v, want one line naming it", args[0], err)
		}
		t.Logf("%s: %v", args[0], err)
	}
	var out bytes.Buffer
	if err := run(ctx, create, env("DATABASE_URL", pooled, "MIGRATE_DATABASE_URL", direct), &out, io.Discard); err != nil {
		t.Fatalf("accounts create with MIGRATE_DATABASE_URL: %v", err)
	}
	var got struct{ ID, APIKey string }
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || !strings.HasPrefix(got.ID, "acct_") {
		t.Fatalf("accounts create printed %q (%v)", out.String(), err)
	}
}

// emptyDatabase is a fresh database without migrations.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	return pgtestdb.Custom(t, postgrestest.ServerConfig(t), pgtestdb.NoopMigrator{}).URL()
}
