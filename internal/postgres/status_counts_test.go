package postgres_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

// The counts kept by trigger (migration 00011) equal a full count of the
// payments table after inserts, status changes, deletes and folds, also
// with folds running concurrently with writers and with each other.
func TestPaymentCountByStatusMatchesTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := postgrestest.New(t)
	store := postgres.NewPaymentStore(db)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO accounts (id, name, api_key_hash, stripe_secret_enc, stripe_secret_hmac, created_at)
		VALUES ('acct_1', 'Loja', 'h', 'e', 'm', now())`)
	insert := func(from, to int, status string) {
		t.Helper()
		exec(`INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method, status, created_at, updated_at)
			SELECT 'pay_' || i, 'acct_1', 'pedido-' || i, 1, 100, 'BRL', 'manual', 'pm_card_visa', $3, now(), now()
			FROM generate_series($1::int, $2::int) AS i`, from, to, status)
	}
	want := func(what string) {
		t.Helper()
		got, err := store.CountByStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		full := map[string]int64{}
		rows, err := db.Pool.Query(ctx, `SELECT status, count(*) FROM payments GROUP BY status`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			var n int64
			if err := rows.Scan(&s, &n); err != nil {
				t.Fatal(err)
			}
			full[s] = n
		}
		rows.Close()
		maps.DeleteFunc(got, func(_ string, n int64) bool { return n == 0 })
		if !maps.Equal(got, full) {
			t.Fatalf("%s: counts %v, table %v", what, got, full)
		}
	}
	want("empty")
	insert(1, 50, "processing")
	want("after inserts")
	exec(`UPDATE payments SET status = 'authorized' WHERE id IN (SELECT 'pay_' || i FROM generate_series(1, 20) AS i)`)
	exec(`UPDATE payments SET status = 'authorized', amount = 200 WHERE id = 'pay_1'`) // same status: no change
	exec(`UPDATE payments SET amount = 300 WHERE id = 'pay_30'`)
	want("after transitions")
	exec(`UPDATE payments SET status = 'captured' WHERE id IN ('pay_1', 'pay_2')`)
	exec(`DELETE FROM payments WHERE id IN ('pay_3', 'pay_40')`)
	want("after a delete")

	// Writers and folds at once.
	errs := make(chan error, 8)
	for w := range 4 {
		go func() {
			_, err := db.Pool.Exec(ctx, `INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method, status, created_at, updated_at)
				SELECT 'pay_w' || $1::int || '_' || i, 'acct_1', 'w' || $1::int || '-' || i, 1, 100, 'BRL', 'manual', 'pm_card_visa', 'unknown', now(), now()
				FROM generate_series(1, 200) AS i`, w)
			if err == nil {
				_, err = db.Pool.Exec(ctx, `UPDATE payments SET status = 'failed' WHERE id LIKE $1`, fmt.Sprintf("pay_w%d_1%%", w))
			}
			errs <- err
		}()
		go func() {
			var err error
			for range 10 {
				if _, err = store.CountByStatus(ctx); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want("after concurrent writers and folds")
	var left int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM payment_status_deltas`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("deltas left after a fold: %d, %v", left, err)
	}
}
