package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/jackc/pgx/v5/pgconn"
)

// A transaction queues the statements whose answer nobody waits for and
// sends them with the next read or with COMMIT: their failures must still
// fail the transaction, and nothing of it may commit.
func TestPipelinedTx(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Truncate(time.Microsecond)
	other := func(b *bundle, id, order string) *payment.Payment {
		p := *b.payment
		p.ID, p.OrderID, p.CreatedAt, p.UpdatedAt = id, order, now, now
		return &p
	}
	audit := func(b *bundle) payment.AuditEntry {
		return payment.AuditEntry{AccountID: "acct_1", PaymentID: b.payment.ID, At: now, Actor: "test", Action: "pipe"}
	}
	audits := func(t *testing.T, b *bundle) int {
		t.Helper()
		var n int
		if err := b.admin.QueryRow(context.Background(), "SELECT count(*) FROM audit_log WHERE action = 'pipe'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	wantUnique := func(t *testing.T, err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			t.Fatalf("err = %v, want a unique violation", err)
		}
	}

	t.Run("AQueuedFailureFailsTheCommit", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, b := setup(t, nil)
		err := store.WithTx(ctx, func(tx payment.Tx) error {
			if err := tx.AuditInsert(ctx, audit(b)); err != nil {
				return err
			}
			// The seeded payment's id again: queued, so no error yet.
			return tx.PaymentInsert(ctx, other(b, b.payment.ID, "pedido-other"))
		})
		wantUnique(t, err)
		if n := audits(t, b); n != 0 {
			t.Fatalf("%d audit entries committed, want 0", n)
		}
	})

	t.Run("AQueuedFailureFailsTheNextRead", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, b := setup(t, nil)
		err := store.WithTx(ctx, func(tx payment.Tx) error {
			if err := tx.PaymentInsert(ctx, other(b, b.payment.ID, "pedido-other")); err != nil {
				t.Fatalf("a queued insert answered %v", err)
			}
			_, err := tx.PaymentGetByIDForUpdate(ctx, "acct_1", b.payment.ID)
			wantUnique(t, err)
			return err
		})
		wantUnique(t, err)
		// The connection went back to the pool out of its transaction.
		if err := store.WithTx(ctx, func(tx payment.Tx) error { return tx.AuditInsert(ctx, audit(b)) }); err != nil {
			t.Fatal(err)
		}
		if n := audits(t, b); n != 1 {
			t.Fatalf("%d audit entries, want 1", n)
		}
	})

	t.Run("TheLiveOrderConflictIsStillTheDomainError", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, b := setup(t, nil)
		err := store.WithTx(ctx, func(tx payment.Tx) error {
			p := other(b, "pay_2", b.payment.OrderID)
			p.Attempt = 2
			return tx.PaymentInsert(ctx, p)
		})
		if !errors.Is(err, payment.ErrLiveOrderConflict) {
			t.Fatalf("err = %v, want ErrLiveOrderConflict", err)
		}
	})

	t.Run("RoundTrips", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		c := &postgres.Counter{}
		store, b := setup(t, nil, postgres.WithCounter(c))
		cost := func(fn func(payment.Tx) error) int64 {
			t.Helper()
			rt := c.RoundTrips()
			if err := store.WithTx(ctx, fn); err != nil {
				t.Fatal(err)
			}
			return c.RoundTrips() - rt
		}
		if n := cost(func(payment.Tx) error { return nil }); n != 0 {
			t.Errorf("a transaction that ran nothing: %d round trips, want 0", n)
		}
		if n := cost(func(tx payment.Tx) error {
			if err := tx.AuditInsert(ctx, audit(b)); err != nil {
				return err
			}
			return tx.AuditInsert(ctx, audit(b))
		}); n != 1 {
			t.Errorf("a transaction of writes: %d round trips, want 1", n)
		}
		if n := cost(func(tx payment.Tx) error {
			_, err := tx.PaymentGetByIDForUpdate(ctx, "acct_1", b.payment.ID)
			return err
		}); n != 2 {
			t.Errorf("a transaction with one read: %d round trips, want 2", n)
		}
	})

	// The attempt number read with a reservation travels in its round
	// trip; a later read after a write reads again, and sees the write.
	t.Run("ReserveNumberedInOneRoundTrip", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		c := &postgres.Counter{}
		store, b := setup(t, nil, postgres.WithCounter(c))
		orderID, op := b.payment.OrderID, payment.OpAuthorize
		reserve := func(tx payment.Tx, key string) int {
			t.Helper()
			rt := c.RoundTrips()
			_, ok, n, err := tx.IdempotencyKeyReserveNumbered(ctx, payment.Reservation{
				Scope:       idempotency.Scope{AccountID: "acct_1", Operation: "payments.create", KeyHash: []byte(key)},
				Fingerprint: []byte("fp"), LeaseUntil: now.Add(time.Minute), Now: now}, orderID, op)
			if err != nil || !ok {
				t.Fatalf("reserve: %v %v", ok, err)
			}
			if got := c.RoundTrips() - rt; got > 1 {
				t.Errorf("reserve and next attempt number in %d round trips, want at most 1", got)
			}
			return n
		}
		err := store.WithTx(ctx, func(tx payment.Tx) error {
			if n := reserve(tx, "k-1"); n != 1 {
				t.Errorf("next attempt %d, want 1", n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		err = store.WithTx(ctx, func(tx payment.Tx) error {
			reserve(tx, "k-2")
			if err := tx.AttemptInsert(ctx, &payment.Attempt{ID: "att_1", AccountID: "acct_1", PaymentID: b.payment.ID,
				OrderID: orderID, Operation: op, Number: 1, ProviderKey: "pk-1", Request: []byte("{}"),
				CreatedAt: now, UpdatedAt: now}); err != nil {
				return err
			}
			n, err := tx.AttemptNextNumber(ctx, "acct_1", orderID, op)
			if err != nil {
				return err
			}
			if n != 2 {
				t.Errorf("next attempt after inserting 1: %d, want 2", n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
