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

// A pass's claims read the attempts that are due, not the backlog waiting
// for its turn: with thousands of unresolved attempts scheduled later
// (unknown ones backing off, Pix payments waiting for their next poll),
// claiming the few due ones and then finding none due reads a handful of
// index entries. Bounding the scan by the due time is what keeps the last,
// empty claim of every pass from walking the whole backlog.
func TestClaimReadsOnlyDueAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, exec := planDB(t)
	const later = 4000
	exec(`INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method, status, created_at, updated_at)
		SELECT 'pay_bl_' || i, 'acct_1', 'pedido-bl-' || i, 1, 100, 'BRL', 'manual', 'pm_card_visa', 'unknown', now(), now()
		FROM generate_series(1, 4003) AS i`)
	exec(`INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status, request,
		                      reconcile_tries, next_reconcile_at, created_at, updated_at)
		SELECT 'att_bl_' || i, 'acct_1', 'pay_bl_' || i, 'pedido-bl-' || i, 'autorizar', 1, 'pedido-bl-' || i || ':autorizar-v1',
		       CASE WHEN i % 2 = 0 THEN 'unknown' ELSE 'waiting' END, '{}',
		       CASE WHEN i > 4000 THEN 0 ELSE 1 END,
		       CASE WHEN i > 4000 THEN NULL ELSE now() + i * interval '1 second' END,
		       now() - interval '1h', now() - interval '1h'
		FROM generate_series(1, 4003) AS i`)
	exec(`UPDATE attempts SET status = 'unknown' WHERE id IN ('att_bl_4001', 'att_bl_4003')`)
	exec(`ANALYZE attempts`)
	tuplesRead := func() int64 {
		t.Helper()
		var n int64
		exec(`SELECT pg_stat_force_next_flush()`)
		if err := db.Pool.QueryRow(ctx, `SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'attempts_due'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := tuplesRead()
	store := postgres.NewPaymentStore(db)
	now := time.Now()
	claimed := 0
	for {
		_, err := store.AttemptClaimNext(ctx, reconcile.Due{UpdatedBefore: now.Add(-time.Minute), Before: now}, now, now.Add(time.Minute),
			func(int) time.Time { return now.Add(time.Hour) })
		if errors.Is(err, payment.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		claimed++
	}
	if claimed != 3 {
		t.Fatalf("claimed %d attempts, want the 3 due ones", claimed)
	}
	if read := tuplesRead() - before; read > 20 {
		t.Fatalf("claiming 3 due attempts among %d scheduled later read %d index entries, want a handful", later, read)
	}
}
