package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/peterldowns/pgtestdb"
)

// Behind PgBouncer in transaction mode, `migrate` and `accounts create`
// fail in one line naming MIGRATE_DATABASE_URL when it is not set, and work
// when it names the direct URL.
func TestCommandsThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := emptyDatabase(t)
	pooled := postgrestest.PgBouncer(t, direct)
	create := []string{"accounts", "create", "--name", "Loja", "--stripe-key", "sk_test_pooled0123456789"}

	for _, args := range [][]string{{"migrate"}, create} {
		err := run(ctx, args, env("DATABASE_URL", pooled, "STRIPE_API_BASE", simURL()), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "MIGRATE_DATABASE_URL") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s through PgBouncer without MIGRATE_DATABASE_URL: %v, want one line naming it", args[0], err)
		}
		t.Logf("%s: %v", args[0], err)
	}
	var out bytes.Buffer
	if err := run(ctx, create, env("DATABASE_URL", pooled, "MIGRATE_DATABASE_URL", direct, "STRIPE_API_BASE", simURL()), &out, io.Discard); err != nil {
		t.Fatalf("accounts create with MIGRATE_DATABASE_URL: %v", err)
	}
	var got struct{ ID, APIKey string }
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || !strings.HasPrefix(got.ID, "acct_") {
		t.Fatalf("accounts create printed %q (%v)", out.String(), err)
	}
}

// emptyDatabase is a fresh database without migrations.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	return pgtestdb.Custom(t, postgrestest.ServerConfig(t), pgtestdb.NoopMigrator{}).URL()
}

// The real binary with DATABASE_URL through a PgBouncer configured by
// Debian's default pgbouncer.ini (only pool_mode = transaction and the
// lines that reach the server changed) starts, and 240 concurrent creates
// all succeed, each sent to the provider once.
func TestServeBehindDefaultPgBouncer(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	if postgrestest.Pooled(t) {
		t.Skip("starts its own PgBouncer in front of the direct URL")
	}
	pooled := postgrestest.PgBouncer(t, e.DBURL)
	p := start(t, e, buildBinary(t, ""), "DATABASE_URL="+pooled, "MIGRATE_DATABASE_URL="+e.DBURL,
		"PROVIDER_TIMEOUT=20s", "IN_PROGRESS_LEASE=30s")

	const creates = 240
	type answer struct {
		status int
		body   string
		err    error
	}
	answers := make(chan answer, creates)
	for i := range creates {
		go func() {
			body := fmt.Sprintf(`{"order_id":"pedido-pool-%d","amount":2000,"currency":"BRL","payment_method":"pm_card_visa","capture_method":"manual"}`, i)
			r, err := e.TryDo(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: fmt.Sprintf("pool-%d", i), Body: body, BaseURL: p.url})
			if err != nil {
				answers <- answer{err: err}
				return
			}
			answers <- answer{status: r.Status, body: string(r.Body)}
		}()
	}
	for range creates {
		a := apitest.Recv(t, answers, "a create's answer")
		if a.err != nil || a.status != http.StatusCreated || !strings.Contains(a.body, `"status":"authorized"`) {
			t.Fatalf("create behind PgBouncer: %d %s (%v), want 201 authorized", a.status, a.body, a.err)
		}
	}
	var sent, replayed int
	for _, r := range e.Sim.Requests() {
		if r.Op == "authorize" {
			sent++
			if r.Replayed {
				replayed++
			}
		}
	}
	intents := e.Sim.Intents(e.Account.StripeSecret)
	orders := map[string]int{}
	for _, pi := range intents {
		orders[pi.Metadata["order_id"]]++
	}
	if sent != creates || replayed != 0 || len(intents) != creates || len(orders) != creates {
		t.Fatalf("simulator: %d authorize requests (%d replayed), %d intents for %d orders; want %d of each, none replayed",
			sent, replayed, len(intents), len(orders), creates)
	}
	var stored int
	if err := e.DB.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM payments WHERE status = 'authorized' AND order_id LIKE 'pedido-pool-%'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != creates {
		t.Fatalf("%d authorized payments stored, want %d", stored, creates)
	}
}
