package api_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
)

// TestSearchLagBeyondGrace: the provider's search lags its writes by longer
// than PROVIDER_SEARCH_GRACE, and the authorization's event has not come.
// An authorization whose answer was lost, past its key's window, is looked
// up, not found, and failed not_found_at_provider although the provider
// holds it: the grace is what makes "not found" a proof, so it must cover
// the provider's lag. A late event cannot move the failed payment back; the
// discrepancy audit, which reads Stripe's list rather than its search,
// finds the provider's authorization for an operator to settle.
func TestSearchLagBeyondGrace(t *testing.T) {
	t.Parallel()
	w := newWebhookEnvWith(t, apitest.Options{KeyRetention: time.Minute, SearchGrace: 2 * time.Minute})
	w.Sim.SetSearchLag(10 * time.Minute)
	p, in := w.unknown(t, "k-lag", createBody("pedido-lag", 2000))
	id := p["id"].(string)
	w.Clock.Advance(3 * time.Minute)

	wantSummary(t, runOnce(t, w.Env, nil), 1, map[string]int{"failed": 1}, 0)
	if got := w.payment(t, id); got["status"] != "failed" || got["failure_code"] != "not_found_at_provider" {
		t.Fatalf("payment = %v, want failed not_found_at_provider (the wrong verdict a too short grace gives)", got)
	}
	wantEffects(t, w.Sim, 1)

	// The authorization's event, arriving late, moves nothing backwards.
	wantOutcome(t, w.deliver(t, piCapturable(in.ID, id)), "ignored")
	w.wantPaymentStatus(t, id, "failed")

	// The audit reads Stripe's list, which does not lag as search does: it
	// finds the authorization within the lag, and once past it the same.
	for _, when := range []string{"within the search lag", "after it"} {
		if _, err := w.Operations.Audit(context.Background(), time.Hour); err != nil {
			t.Fatal(err)
		}
		if got := byPayment(listDiscrepancies(t, w.Env, "?status=open")); !slices.Equal(got[id], []string{"paid_at_provider_not_here"}) || len(got) != 1 {
			t.Fatalf("discrepancies %s = %v, want paid_at_provider_not_here on %s", when, got, id)
		}
		w.Clock.Advance(10 * time.Minute)
	}
}

// TestSearchLagWithinGrace: a grace longer than the provider's search lag
// keeps "not found" from proving anything until the search shows the
// authorization, which the payment then takes.
func TestSearchLagWithinGrace(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{KeyRetention: time.Minute, SearchGrace: 10 * time.Minute})
	e.Sim.SetSearchLag(5 * time.Minute)
	drop := dropAuthorize(e)
	p := createUnknown(t, e, "k-lag-ok", createBody("pedido-lag-ok", 2000))
	drop.Remove()
	id := p["id"].(string)

	e.Clock.Advance(3 * time.Minute)
	wantSummary(t, runOnce(t, e, nil), 1, map[string]int{}, 1)
	if got := getPaymentJSON(t, e, id); got["status"] != "unknown" {
		t.Fatalf("payment = %v, want unknown while the search lags", got)
	}
	e.Clock.Advance(3 * time.Minute)
	wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
	if got := getPaymentJSON(t, e, id); got["status"] != "authorized" {
		t.Fatalf("payment = %v, want authorized once the search shows it", got)
	}
	wantEffects(t, e.Sim, 1)
}
