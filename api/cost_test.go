package api_test

import (
	"net/http"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// TestCost holds the money path to its budget, counted in round trips, not
// time: a create is two transactions and one provider call; a replay is one
// indexed read and no provider call (the API key is cached after its first
// use).
func TestCost(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	tx0, st0 := e.Counter.Counts()
	rt0 := e.Counter.RoundTrips()
	wantStatus(t, create(e, "k-cost", createBody("pedido-cost", 100)), http.StatusCreated)
	tx1, st1 := e.Counter.Counts()
	rt1 := e.Counter.RoundTrips()
	if txs := tx1 - tx0; txs != 2 {
		t.Errorf("a create ran %d transactions, want 2", txs)
	}
	if calls := len(e.Sim.Requests()); calls != 1 {
		t.Errorf("a create made %d provider calls, want 1", calls)
	}
	t.Logf("create: %d transactions, %d statements, %d round trips", tx1-tx0, st1-st0, rt1-rt0)

	wantStatus(t, create(e, "k-cost", createBody("pedido-cost", 100)), http.StatusCreated)
	tx2, st2 := e.Counter.Counts()
	t.Logf("replay: %d round trips", e.Counter.RoundTrips()-rt1)
	if txs, sts := tx2-tx1, st2-st1; txs != 0 || sts != 1 {
		t.Errorf("a replay ran %d transactions and %d statements, want 0 and 1 (the idempotency key)", txs, sts)
	}
	if calls := len(e.Sim.Requests()); calls != 1 {
		t.Errorf("a replay reached the provider")
	}
}

// TestCostPix holds a Pix create to the card's budget: two transactions and
// one provider call to hand the customer a QR code, one statement to replay
// it; the payment then completes from the provider's webhook without a
// provider call. The figures are logged next to a card's.
func TestCostPix(t *testing.T) {
	t.Parallel()
	const pix = `{"order_id":"pedido-cost-pix","amount":100,"currency":"BRL","payment_method":"pix"}`
	e := apitest.New(t, apitest.Options{})
	// A card first, which also puts the API key in the cache.
	tx0, st0 := e.Counter.Counts()
	wantStatus(t, create(e, "k-cost-card", createBody("pedido-cost-card", 100)), http.StatusCreated)
	tx1, st1 := e.Counter.Counts()
	r := create(e, "k-cost-pix", pix)
	requiresAction(t, r, "pix_display_qr_code")
	tx2, st2 := e.Counter.Counts()
	if txs := tx2 - tx1; txs != 2 {
		t.Errorf("a Pix create ran %d transactions, want 2", txs)
	}
	if n := len(e.Sim.Requests()); n != 2 {
		t.Errorf("a card and a Pix create made %d provider calls, want 2", n)
	}
	again := create(e, "k-cost-pix", pix)
	tx3, st3 := e.Counter.Counts()
	if txs, sts := tx3-tx2, st3-st2; txs != 0 || sts != 1 || string(again.Body) != string(r.Body) {
		t.Errorf("a Pix replay ran %d transactions and %d statements, want 0 and 1 and the same QR code", txs, sts)
	}

	// Completion: the provider's webhook carries the state.
	w := newAsyncEnv(t)
	p := requiresAction(t, w.create("k-cost-paid", pix), "pix_display_qr_code")
	w.hooks(t) // the requires_action event of the create
	calls := len(w.Sim.Requests())
	tx4, st4 := w.Counter.Counts()
	w.transition(t, "pay", p["provider_payment_id"].(string))
	w.hooks(t)
	tx5, st5 := w.Counter.Counts()
	if paid := w.get(t, p["id"].(string)); paid["status"] != "captured" {
		t.Fatalf("after the customer paid: %v, want captured", paid["status"])
	}
	if n := len(w.Sim.Requests()) - calls; n != 0 {
		t.Errorf("completing the Pix made %d provider calls, want 0", n)
	}
	t.Logf("card create: %d transactions, %d statements, 1 provider call", tx1-tx0, st1-st0)
	t.Logf("pix create: %d transactions, %d statements, 1 provider call; replay: %d statement", tx2-tx1, st2-st1, st3-st2)
	t.Logf("pix paid (one webhook): %d transactions, %d statements, 0 provider calls", tx5-tx4, st5-st4)
}
