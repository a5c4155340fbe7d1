package postgres_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

// planDB opens a fresh database whose sessions price sequential scans out,
// so a query that has an index to use uses it, seeded with one account and
// 200 captured payments; exec runs a statement or fails the test.
func planDB(t *testing.T) (db *postgres.DB, exec func(sql string)) {
	t.Helper()
	ctx := context.Background()
	u, err := url.Parse(postgrestest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-c enable_seqscan=off")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads + literally
	db, err = postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	exec = func(sql string) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO accounts (id, name, api_key_hash, stripe_secret_enc, stripe_secret_hmac, created_at)
		VALUES ('acct_1', 'Loja', 'h', 'e', 'm', now())`)
	exec(`INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method, status, created_at, updated_at)
		SELECT 'pay_' || i, 'acct_1', 'pedido-' || i, 1, 100, 'BRL', 'manual', 'pm_card_visa', 'captured', now(), now()
		FROM generate_series(1, 200) AS i`)
	return db, exec
}
