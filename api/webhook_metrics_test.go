package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
)

// TestMetricsWebhookEndpointDeliveries moves every outcome of the
// outbound delivery counter, the pending age and the disabled gauge.
func TestMetricsWebhookEndpointDeliveries(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
	rc := &receiver{failures: 1}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	ok := createEndpoint(t, e, "k-ok", srv.URL, "payment.authorized")["id"].(string)
	final := createEndpoint(t, e, "k-final", srv.URL+"/final", "payment.authorized")["id"].(string)
	refused := createEndpoint(t, e, "k-refused", srv.URL+"/refused", "payment.authorized")["id"].(string)
	gone := createEndpoint(t, e, "k-gone", srv.URL+"/gone", "payment.authorized")["id"].(string)
	before := scrapeMetrics(t, e)
	apitest.WantStatus(t, e.Create("k-pay", apitest.CreateBody("pedido-metrics", 2000)), http.StatusCreated)

	// Nothing delivered yet: the pending age grows with the clock, per
	// endpoint too.
	e.Clock.Advance(10 * time.Minute)
	sc := scrapeMetrics(t, e)
	if got := sc.get("payments_webhook_endpoint_oldest_pending_age_seconds"); got < 600 {
		t.Fatalf("oldest pending age = %v, want ≥ 600", got)
	}
	for _, id := range []string{ok, final, refused, gone} {
		if got := sc.get("payments_webhook_endpoint_oldest_pending_age_by_endpoint_seconds", "endpoint_id", id); got < 600 {
			t.Fatalf("pending age of %s = %v, want ≥ 600", id, got)
		}
	}

	// ok: fails once (retrying), then succeeds.
	job := webhookJobsFor(t, e, ok)[0]
	res, err := e.WorkWebhookJob(t, job)
	if err == nil {
		t.Fatal("first attempt succeeded, want a failure")
	}
	if _, err := e.WorkWebhookJob(t, res.Job); err != nil {
		t.Fatal(err)
	}
	// final: its last attempt fails.
	rc.mu.Lock()
	rc.failures = 1 << 30
	rc.mu.Unlock()
	job = webhookJobsFor(t, e, final)[0]
	job.Attempt = job.MaxAttempts - 1
	if _, err := e.WorkWebhookJob(t, job); err == nil {
		t.Fatal("last attempt succeeded, want a failure")
	}
	// refused: the URL now points at a non-public address, which the guard
	// refuses even with WEBHOOK_ALLOW_PRIVATE off.
	if _, err := e.DB.Pool.Exec(context.Background(), `UPDATE webhook_endpoints SET url = 'https://127.0.0.1/h' WHERE id = $1`, refused); err != nil {
		t.Fatal(err)
	}
	strict := *e.WebhookWorker
	strict.Guard.AllowPrivate = false
	w := e.WebhookWorker
	e.WebhookWorker = &strict
	_, err = e.WorkWebhookJob(t, webhookJobsFor(t, e, refused)[0])
	e.WebhookWorker = w
	if err == nil {
		t.Fatal("a delivery to loopback went through")
	}
	// gone: disabled by the merchant, its delivery is canceled.
	apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPatch, Path: "/v1/webhook_endpoints/" + gone, Body: `{"enabled":false}`}), http.StatusOK)
	if _, err := e.WorkWebhookJob(t, webhookJobsFor(t, e, gone)[0]); err != nil {
		t.Fatal(err)
	}

	after := scrapeMetrics(t, e)
	for outcome, n := range map[string]float64{"succeeded": 1, "retrying": 1, "failed": 1, "refused": 1, "canceled": 1} {
		moved(t, before, after, n, "payments_webhook_endpoint_deliveries_total", "outcome", outcome)
	}
	moved(t, before, after, 1, "payments_webhook_endpoints_disabled", "reason", "merchant")
	// Only refused is left pending (it retries), so only it keeps a series.
	for _, id := range []string{ok, final, gone} {
		if got := after.get("payments_webhook_endpoint_oldest_pending_age_by_endpoint_seconds", "endpoint_id", id); got != 0 {
			t.Errorf("pending age of %s = %v after its delivery ended, want no series", id, got)
		}
	}
	if got := after.get("payments_webhook_endpoint_oldest_pending_age_by_endpoint_seconds", "endpoint_id", refused); got < 600 {
		t.Errorf("pending age of %s = %v, want ≥ 600", refused, got)
	}
}
