package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/reconcile"
)

// The reconciler claims from the few unresolved attempts through an index,
// never by reading every attempt ever made: with sequential scans priced
// out, claiming must not scan the attempts table.
func TestClaimDoesNotScanAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, exec := planDB(t)
	exec(`INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status, request, created_at, updated_at)
		SELECT 'att_' || i, 'acct_1', 'pay_' || i, 'pedido-' || i, 'autorizar', 1, 'pedido-' || i || ':autorizar-v1',
		       CASE WHEN i % 50 = 0 THEN 'unknown' WHEN i % 50 = 1 THEN 'waiting' ELSE 'succeeded' END, '{}', now() - interval '1h', now() - interval '1h'
		FROM generate_series(1, 200) AS i`)
	exec(`ANALYZE attempts`)
	seqScans := func() int64 {
		t.Helper()
		var n int64
		exec(`SELECT pg_stat_force_next_flush()`)
		if err := db.Pool.QueryRow(ctx, `SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'attempts'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := seqScans()
	store := postgres.NewPaymentStore(db)
	now := time.Now()
	claimed := 0
	for {
		a, err := store.AttemptClaimNext(ctx, reconcile.Due{UpdatedBefore: now, Before: now}, now, now.Add(time.Minute),
			func(int) time.Time { return now.Add(time.Hour) })
		if errors.Is(err, payment.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if a.Status.Resolved() {
			t.Fatalf("claimed resolved attempt %s", a.ID)
		}
		claimed++
	}
	if claimed != 8 {
		t.Fatalf("claimed %d attempts, want the 8 unresolved ones", claimed)
	}
	if after := seqScans(); after != before {
		t.Fatalf("claiming scanned the attempts table %d times, want an index", after-before)
	}
}
