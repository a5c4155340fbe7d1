package postgres_test

import (
	"context"
	"testing"

	"github.com/acmepay/payments/internal/postgres"
)

// The console's timeline reads a payment's events through events_payment,
// not by walking every event of the payment's account.
func TestEventListByPaymentUsesItsIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, exec := planDB(t)
	exec(`INSERT INTO events (id, account_id, payment_id, type, payload, created_at, seq)
		SELECT 'evt_' || i, 'acct_1', 'pay_' || (i % 200 + 1), 'payment.captured', '{}', now(), i
		FROM generate_series(1, 2000) AS i`)
	exec(`ANALYZE events`)
	indexScans := func() int64 {
		t.Helper()
		var n int64
		exec(`SELECT pg_stat_force_next_flush()`)
		if err := db.Pool.QueryRow(ctx, `SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'events_payment'`).Scan(&n); err != nil {
			t.Fatalf("events_payment: %v", err)
		}
		return n
	}
	before := indexScans()
	events, err := postgres.NewConsoleStore(db).EventListByPayment(ctx, "acct_1", "pay_7", 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 10 {
		t.Fatalf("listed %d events, want the payment's 10", len(events))
	}
	if after := indexScans(); after == before {
		t.Fatal("the payment's events were not read through events_payment")
	}
}
