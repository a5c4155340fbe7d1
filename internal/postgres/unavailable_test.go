package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/jackc/pgx/v5"
)

// TestLostConnectionIsUnavailable: a connection the server drops under the
// service (a restart, a failover, an admin terminating backends) is the
// database being unavailable: 503 unavailable with Retry-After, not 500
// internal. Found by `make chaos -private-pg`, whose PostgreSQL restart got
// 500s for queries in flight ("unexpected EOF", "connection reset by peer",
// SQLSTATE 57P01).
func TestLostConnectionIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := postgrestest.New(t)
	store := postgres.NewPaymentStore(db)
	if _, err := store.PaymentGetByID(ctx, "acct_x", "pay_x"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("warm-up read: %v", err)
	}
	// Terminate the pool's backends, as a restart does.
	admin, err := pgx.Connect(ctx, db.Pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	err = store.WithTx(ctx, func(tx payment.Tx) error {
		_, err := tx.PaymentGetByIDForUpdate(ctx, "acct_x", "pay_x")
		return err
	})
	if !errors.Is(err, postgres.ErrUnavailable) {
		t.Fatalf("a query on a connection the server dropped: %v; want ErrUnavailable (503)", err)
	}
}
