package main

import (
	"context"
	"testing"

	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

// The DB_* settings reach every connection of the pool the commands open.
func TestOpenDBBoundsSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := loadConfig(env("DATABASE_URL", postgrestest.URL(t), "DB_LOCK_TIMEOUT", "3s"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for name, want := range map[string]string{
		"statement_timeout": "5s", "lock_timeout": "3s", "idle_in_transaction_session_timeout": "10s",
	} {
		var got string
		if err := db.Pool.QueryRow(ctx, "SHOW "+name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}
