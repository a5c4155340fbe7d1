package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/jackc/pgx/v5"
)

// openDB bounds every session with the DB_* timeouts, also for a
// statement sent outside a transaction, without sending them at
// connection start (a transaction pooler would refuse them).
func TestOpenDBBoundsSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := postgrestest.URL(t)
	cfg, err := loadConfig(env("DATABASE_URL", dbURL, "DB_LOCK_TIMEOUT", "300ms"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var source string
	if err := db.Pool.QueryRow(ctx, "SELECT source FROM pg_settings WHERE name = 'lock_timeout'").Scan(&source); err != nil {
		t.Fatal(err)
	}
	if source == "client" {
		t.Errorf("lock_timeout sent at connection start")
	}
	store := postgres.NewAccountStore(db)
	now := time.Now().UTC().Truncate(time.Microsecond)
	if err := store.AccountInsert(ctx, account.Row{ID: "acct_locked", Name: "Loja", APIKeyHash: []byte("h"),
		StripeSecretEnc: []byte("enc"), StripeSecretHMAC: []byte("hmac"), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM accounts WHERE id = 'acct_locked' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	// A rotation is one UPDATE outside a transaction: DB_LOCK_TIMEOUT ends
	// its wait, and the answer is unavailable (503), not a hang.
	start := time.Now()
	_, err = store.AccountRotateAPIKey(ctx, "acct_locked", []byte("h2"), now, now)
	if !errors.Is(err, postgres.ErrUnavailable) || time.Since(start) < 300*time.Millisecond || time.Since(start) > 5*time.Second {
		t.Fatalf("an update of a locked account: %v after %s, want unavailable after DB_LOCK_TIMEOUT (300ms)", err, time.Since(start))
	}
}
