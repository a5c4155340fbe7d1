package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/acmepay/payments/migrations"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// TestFeedAcrossMigrationAndRestart runs on a private cluster, which it
// restarts. A consumer's cursor from before migration 00014 keeps its
// place; then a writer that began first is still open when the server
// crashes, while a later writer has committed: after recovery the consumer,
// with the cursor it held, gets the committed event exactly once and never
// the lost writer's, and events written after the restart come after it.
func TestFeedAcrossMigrationAndRestart(t *testing.T) {
	ctx := context.Background()
	c := postgrestest.PrivateCluster(t)
	db, err := postgres.Open(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	// The schema before 00014, with three events numbered by the counter row.
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	gp, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gp.UpTo(ctx, 13); err != nil {
		t.Fatalf("migrate to 13: %v", err)
	}
	sqlDB.Close() // its idle connections are the pool's
	exec(`INSERT INTO accounts (id, name, api_key_hash, stripe_secret_enc, stripe_secret_hmac, created_at)
		VALUES ('acct_1', 'Loja', 'h', 'e', 'm', now())`)
	for i := 1; i <= 3; i++ {
		exec(`INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method, status, created_at, updated_at)
			VALUES ($1, 'acct_1', $1, 1, 100, 'BRL', 'manual', 'pm_card_visa', 'processing', now(), now())`, fmt.Sprint("pay_old", i))
		exec(`WITH next AS (
				INSERT INTO account_event_seqs (account_id, seq) VALUES ('acct_1', 1)
				ON CONFLICT (account_id) DO UPDATE SET seq = account_event_seqs.seq + 1 RETURNING seq)
			INSERT INTO events (id, account_id, payment_id, type, payload, created_at, seq)
			SELECT $1, 'acct_1', $2, 'payment.processing', json_build_object('id', $1::text), now(), next.seq FROM next`, fmt.Sprint("evt_old", i), fmt.Sprint("pay_old", i))
	}
	if err := postgres.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}

	store := postgres.NewPaymentStore(db)
	var seen []string
	cursor := "2" // a consumer that had read two events before the migration
	// poll reads one page after the cursor, as GET /v1/events does, retrying
	// while the server restarts.
	poll := func() []string {
		t.Helper()
		pos, ok := payment.ParseFeedCursor(cursor)
		if !ok {
			t.Fatalf("cursor %q does not parse", cursor)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			evs, err := store.EventListAfter(ctx, "acct_1", pos, 100)
			if err != nil {
				if time.Now().After(deadline) {
					t.Fatalf("read the feed: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			var ids []string
			for _, e := range evs {
				var p struct{ ID string }
				if err := json.Unmarshal(e.Payload, &p); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, p.ID)
				cursor = e.Position.String()
			}
			seen = append(seen, ids...)
			return ids
		}
	}
	if got := poll(); fmt.Sprint(got) != "[evt_old3]" {
		t.Fatalf("after the old cursor 2: %q, want [evt_old3]", got)
	}

	write := func(ctx context.Context, n string, hold <-chan struct{}, wrote chan<- struct{}) error {
		now := time.Now().UTC().Truncate(time.Microsecond)
		return store.WithTx(ctx, func(tx payment.Tx) error {
			p := &payment.Payment{ID: "pay_" + n, AccountID: "acct_1", OrderID: n, Attempt: 1, Amount: 100, Currency: "BRL",
				CaptureMethod: "manual", PaymentMethod: "pm_card_visa", Status: payment.StatusProcessing, CreatedAt: now, UpdatedAt: now}
			if err := tx.PaymentInsert(ctx, p); err != nil {
				return err
			}
			if err := tx.EventInsert(ctx, payment.Event{ID: "evt_" + n, AccountID: "acct_1", PaymentID: p.ID,
				Type: "payment.processing", Payload: json.RawMessage(`{"id":"evt_` + n + `"}`), CreatedAt: now}); err != nil {
				return err
			}
			// A read sends the queued writes to the server.
			if _, err := tx.PaymentGetByIDForUpdate(ctx, "acct_1", p.ID); err != nil {
				return err
			}
			if hold != nil {
				close(wrote)
				<-hold
			}
			return nil
		})
	}

	// Writer A begins first and stays open; writer B commits after it began.
	hold, wrote, aDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	release := sync.OnceFunc(func() { close(hold) })
	// Before the pool closes: a failed test must not leave A holding its
	// connection.
	t.Cleanup(release)
	go func() { aDone <- write(ctx, "a", hold, wrote) }()
	select {
	case <-wrote:
	case err := <-aDone:
		t.Fatalf("writer A: %v", err)
	}
	if err := write(ctx, "b", nil, nil); err != nil {
		t.Fatalf("writer B: %v", err)
	}
	for range 3 {
		if got := poll(); len(got) != 0 {
			t.Fatalf("while writer A is open the feed served %q", got)
		}
	}

	c.Restart(t)
	release()
	if err := <-aDone; err == nil {
		t.Fatal("writer A committed across the restart")
	}
	if err := write(ctx, "c", nil, nil); err != nil {
		// The pool's first use of a cut connection fails; once more.
		if err := write(ctx, "c", nil, nil); err != nil {
			t.Fatalf("writer C after the restart: %v", err)
		}
	}
	// Nothing runs now but this test: a few polls read everything.
	for range 5 {
		poll()
	}
	if want := "[evt_old3 evt_b evt_c]"; fmt.Sprint(seen) != want {
		t.Fatalf("the consumer saw %q across the restart, want %s: each committed event once, in order, A's never", seen, want)
	}
}
