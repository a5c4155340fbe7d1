package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/reconcile"
)

// TestMetricsByProvider: every metric about provider calls, transitions,
// reconciliation and provider webhooks says which provider it counts.
func TestMetricsByProvider(t *testing.T) {
	t.Parallel()

	t.Run("CallsAndTransitions", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		before := scrapeMetrics(t, e)
		wantStatus(t, create(e, "k-card", createBody("pedido-card", 2000)), http.StatusCreated)
		if p := createAt(t, e, mpMerchant(e), "k-pix", fmt.Sprintf(mpPixBody, "pedido-pix")); p["status"] != "requires_action" {
			t.Fatalf("pix payment = %v", p)
		}
		after := scrapeMetrics(t, e)
		for _, prov := range []string{"stripe", "mercadopago"} {
			moved(t, before, after, 1, "payments_provider_calls_total", "provider", prov, "operation", "autorizar", "outcome", "succeeded")
			moved(t, before, after, 1, "payments_provider_calls_total", "provider", prov)
			moved(t, before, after, 1, "payments_provider_call_duration_seconds_count", "provider", prov, "operation", "autorizar")
			moved(t, before, after, 1, "payments_status_transitions_total", "provider", prov)
		}
		moved(t, before, after, 1, "payments_status_transitions_total", "provider", "stripe", "from", "processing", "to", "authorized")
		moved(t, before, after, 1, "payments_status_transitions_total", "provider", "mercadopago", "from", "processing", "to", "requires_action")
		moved(t, before, after, 0, "payments_provider_calls_total", "provider", "other")
	})

	t.Run("Reconciler", testReconcilerMetricsByProvider)

	t.Run("Webhooks", func(t *testing.T) {
		t.Parallel()
		w := newMPWebhookEnv(t, "pedido-hook")
		before := scrapeMetrics(t, w.Env)
		outcome := w.deliver(t, mpNote(w.mpID), "req-1")
		bad := mpSign(w.mpID, "req-2", strconv.FormatInt(time.Now().Unix(), 10), "wrong-secret")
		wantStatus(t, w.post(mpNote(w.mpID), "req-2", bad), http.StatusBadRequest)
		after := scrapeMetrics(t, w.Env)
		moved(t, before, after, 1, "payments_webhook_deliveries_total", "provider", "mercadopago", "outcome", outcome)
		moved(t, before, after, 1, "payments_webhook_deliveries_total", "provider", "mercadopago", "outcome", "rejected")
		moved(t, before, after, 0, "payments_webhook_deliveries_total", "provider", "stripe")
	})
}

// testReconcilerMetricsByProvider: a Mercado Pago attempt the reconciler
// examines, leaves unresolved and then resolves is counted under its
// provider.
func testReconcilerMetricsByProvider(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	m := mpMerchant(e)
	drop := e.Sim.Inject(providersim.Fault{Op: "mp_create", Kind: providersim.DropAfterEffect, Times: 2})
	if p := createAt(t, e, m, "k-lost", fmt.Sprintf(mpPixBody, "pedido-lost")); p["status"] != "unknown" {
		t.Fatalf("payment = %v, want unknown", p)
	}
	drop.Remove()
	// Past RECONCILE_ALERT_AFTER, and not yet found by the search.
	e.Sim.SetMPSearchLag(time.Hour)
	rec, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(),
		Accounts: fixedAccounts{m}, Metrics: e.Metrics, After: 0, AlertAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(2 * time.Minute)
	before := scrapeMetrics(t, e)
	if sum, err := rec.RunOnce(context.Background()); err != nil || sum.StillUnknown != 1 || sum.NeedsAttention != 1 {
		t.Fatalf("RunOnce = %+v, %v; want the attempt still unknown and needing attention", sum, err)
	}
	mid := scrapeMetrics(t, e)
	moved(t, before, mid, 1, "payments_reconciler_examined_total", "provider", "mercadopago")
	moved(t, before, mid, 0, "payments_reconciler_examined_total", "provider", "stripe")
	for metric, want := range map[string]map[string]float64{
		"payments_reconciler_still_unknown":              {"mercadopago": 1, "stripe": 0},
		"payments_reconciler_attempts_needing_attention": {"mercadopago": 1, "stripe": 0},
	} {
		for prov, n := range want {
			if got := mid.get(metric, "provider", prov); got != n {
				t.Errorf("%s{provider=%q} = %v, want %v", metric, prov, got, n)
			}
		}
	}

	e.Sim.SetMPSearchLag(0)
	if sum, err := rec.RunOnce(context.Background()); err != nil || sum.Resolved["requires_action"] != 1 {
		t.Fatalf("RunOnce = %+v, %v; want the Pix found waiting", sum, err)
	}
	after := scrapeMetrics(t, e)
	moved(t, mid, after, 1, "payments_reconciler_resolutions_total", "provider", "mercadopago", "status", "requires_action")
	moved(t, mid, after, 0, "payments_reconciler_resolutions_total", "provider", "stripe")
	if got := after.get("payments_reconciler_still_unknown", "provider", "mercadopago"); got != 0 {
		t.Errorf("still unknown at mercadopago = %v after the resolution, want 0", got)
	}

}
