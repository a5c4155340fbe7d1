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
	wantStatus(t, create(e, "k-cost", createBody("pedido-cost", 100)), http.StatusCreated)
	tx1, st1 := e.Counter.Counts()
	if txs := tx1 - tx0; txs != 2 {
		t.Errorf("a create ran %d transactions, want 2", txs)
	}
	if calls := len(e.Sim.Requests()); calls != 1 {
		t.Errorf("a create made %d provider calls, want 1", calls)
	}
	t.Logf("create: %d transactions, %d statements", tx1-tx0, st1-st0)

	wantStatus(t, create(e, "k-cost", createBody("pedido-cost", 100)), http.StatusCreated)
	tx2, st2 := e.Counter.Counts()
	if txs, sts := tx2-tx1, st2-st1; txs != 0 || sts != 1 {
		t.Errorf("a replay ran %d transactions and %d statements, want 0 and 1 (the idempotency key)", txs, sts)
	}
	if calls := len(e.Sim.Requests()); calls != 1 {
		t.Errorf("a replay reached the provider")
	}
}
