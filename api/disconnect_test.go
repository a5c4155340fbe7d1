package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// TestClientGoneKeepsTheProviderAnswer: a shopper who closes the tab while
// the provider is answering must not make the service forget the answer.
// The provider call already outlives the request (it runs under
// context.WithoutCancel); recording its outcome must too, or the payment
// sits in processing until IN_PROGRESS_LEASE expires and someone asks the
// provider again. Found by `make chaos` (impatient clients).
func TestClientGoneKeepsTheProviderAnswer(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	hold := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldAfterEffect, Times: 1})

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v1/payments", strings.NewReader(createBody("pedido-gone", 2000)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.APIKey)
	req.Header.Set("Idempotency-Key", "k-gone")
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	// The provider has authorized; its answer is held.
	apitest.Recv(t, hold.Reached(), "the authorization to take effect at the provider")
	cancel() // the shopper goes away
	if err := apitest.Recv(t, errc, "the canceled request to return"); err == nil {
		t.Fatal("the canceled request was answered")
	}
	hold.Release()

	// Well within the 10 s lease, with no reconciler running: only the
	// request itself can have recorded the outcome.
	var status any
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments?order_id=pedido-gone"})
		data, _ := r.JSON(t)["data"].([]any)
		if len(data) == 1 {
			status = data[0].(map[string]any)["status"]
			if status == "authorized" {
				return
			}
		}
	}
	t.Fatalf("the payment is %v 3 s after the provider authorized it; want authorized: the outcome was dropped with the client's connection", status)
}
