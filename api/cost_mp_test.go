package api_test

import (
	"net/http"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// TestCostMercadoPago holds a Mercado Pago payment to the budget of a
// Stripe one: a card create is two transactions and one provider call, a
// replay one read. A Pix paid by notification costs one provider call
// more than Stripe's webhook: the notification is never trusted, so the
// payment is retrieved.
func TestCostMercadoPago(t *testing.T) {
	t.Parallel()
	s := newMPShop(t, true)
	warm := costOf(s.Env, func() {
		wantStatus(t, s.create("k-cost-mp-0", mpCardBody("pedido-cost-mp-0", "tok_APRO", "automatic")), http.StatusCreated)
	})
	calls := s.PaymentCalls()
	c := costOf(s.Env, func() {
		wantStatus(t, s.create("k-cost-mp", mpCardBody("pedido-cost-mp", "tok_APRO", "automatic")), http.StatusCreated)
	})
	wantNames(t, "a Mercado Pago card create", c, createStatements)
	if c.txs != 2 || c.roundTrips > createRoundTrips {
		t.Errorf("a Mercado Pago card create: %v, want 2 transactions and at most %d round trips", c, createRoundTrips)
	}
	if n := s.PaymentCalls() - calls; n != 1 {
		t.Errorf("a Mercado Pago card create made %d provider calls, want 1", n)
	}
	replay := costOf(s.Env, func() {
		wantStatus(t, s.create("k-cost-mp", mpCardBody("pedido-cost-mp", "tok_APRO", "automatic")), http.StatusCreated)
	})
	wantNames(t, "a Mercado Pago replay", replay, replayStatements)
	if replay.txs != 0 || replay.statements != 1 || replay.roundTrips > replayRoundTrips || s.PaymentCalls()-calls != 1 {
		t.Errorf("a Mercado Pago replay: %v, want 0 transactions, 1 statement, no provider call", replay)
	}

	w := newMPWebhookEnv(t, "pedido-cost-mp-pix")
	if _, err := w.Sim.MPPay(mustInt(t, w.mpID)); err != nil {
		t.Fatal(err)
	}
	calls = w.PaymentCalls()
	paid := costOf(w.Env, func() { wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-cost"), "applied") })
	if n := w.PaymentCalls() - calls; n != 1 {
		t.Errorf("a Pix paid by notification made %d provider calls, want 1 (the retrieve)", n)
	}
	if got := getPaymentJSON(t, w.Env, w.paymentID)["status"]; got != "captured" {
		t.Fatalf("after the notification: %v, want captured", got)
	}
	t.Logf("mercadopago card create (API key read): %v, 1 provider call", warm)
	t.Logf("mercadopago card create: %v, 1 provider call; replay: %v", c, replay)
	t.Logf("mercadopago pix paid (one notification): %v, 1 provider call", paid)
}

// TestCostFailover holds a failover to the budget of a create plus one
// statement: Stripe refuses the connection, and the failed attempt, the
// payment moved to Mercado Pago, its attempt and the key waiting on it are
// written in one statement between the create's two transactions.
func TestCostFailover(t *testing.T) {
	t.Parallel()
	s := newFailoverShop(t, apitest.Options{CircuitFailures: 1 << 30})
	s.Sim.RevokeSecret("sk_test_" + apitest.SecretSuffix(t))
	// The first create also puts the API key in the cache.
	wantStatus(t, create(s.Env, "k-cost-fo-0", bothCardsBody("pedido-cost-fo-0")), http.StatusCreated)
	var r *apitest.Response
	c := costOf(s.Env, func() { r = create(s.Env, "k-cost-fo", bothCardsBody("pedido-cost-fo")) })
	wantStatus(t, r, http.StatusCreated)
	if p := r.JSON(t); p["provider"] != "mercadopago" || p["attempt"] != float64(2) {
		t.Fatalf("payment %s, want it at mercadopago, attempt 2", r.Body)
	}
	t.Logf("failover: %v", c)
	wantNames(t, "a failover", c, failoverStatements)
	if n, create := statementCount(failoverStatements), statementCount(createStatements); n > create+1 {
		t.Errorf("a failover is listed with %d statements, want at most a create's %d plus 1", n, create)
	}
	if c.txs != 3 || c.roundTrips > createRoundTrips+2 {
		t.Errorf("a failover: %v, want 3 transactions and at most %d round trips", c, createRoundTrips+2)
	}
}
