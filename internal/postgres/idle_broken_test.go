package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/pgfault"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

// TestIdleConnectionBrokenIsNotAnError: the pool's idle connections are
// reset under it (a pooler or a firewall between). A transaction or a
// statement that finds one has written nothing, so it goes again on a new
// connection instead of failing the request with 503.
func TestIdleConnectionBrokenIsNotAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := postgrestest.URL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	px, err := pgfault.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	db, err := postgres.Open(ctx, px.URL(dbURL), postgres.WithSessionTimeouts(5*time.Second, 2*time.Second, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	store := postgres.NewPaymentStore(db)
	inTx := func() error {
		return store.WithTx(ctx, func(tx payment.Tx) error {
			_, err := tx.PaymentGetByIDForUpdate(ctx, "acct_x", "pay_x")
			return err
		})
	}
	if err := inTx(); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("warm-up transaction: %v", err)
	}
	px.ResetAll()
	if err := inTx(); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("a transaction after the idle connections broke: %v; want it run on a new one", err)
	}
	px.ResetAll()
	if _, err := store.PaymentGetByID(ctx, "acct_x", "pay_x"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("a statement after the idle connections broke: %v; want it run on a new one", err)
	}
}
