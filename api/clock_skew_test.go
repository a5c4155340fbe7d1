package api_test

import (
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
)

// TestProviderClockAhead: the provider's clock runs ahead of the
// service's by more than the re-send margin, so the provider has forgotten
// an attempt's key while the service's clock says it is still kept. A
// re-send then would authorize a second time. The service looks up before
// it re-sends, and re-sends only while the provider's clock (the Date of
// its answers), too, is inside the key's window.
func TestProviderClockAhead(t *testing.T) {
	t.Parallel()

	t.Run("LookupFindsTheEffect", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{KeyRetention: time.Hour, SearchGrace: 2 * time.Minute})
		drop := dropAuthorize(e)
		p := createUnknown(t, e, "k-skew", createBody("pedido-skew", 2000))
		drop.Remove()
		sent := len(opRequests(e.Sim, "authorize"))
		e.Sim.Advance(2 * time.Hour)
		e.Clock.Advance(time.Minute)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
		if got := getPaymentJSON(t, e, p["id"].(string)); got["status"] != "authorized" {
			t.Fatalf("payment = %v, want authorized", got)
		}
		if n := len(opRequests(e.Sim, "authorize")); n != sent {
			t.Fatalf("the key was re-sent %d times after the provider forgot it", n-sent)
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("SearchLagsAndTheKeyIsNotResent", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{KeyRetention: time.Hour, SearchGrace: 2 * time.Minute})
		drop := dropAuthorize(e)
		p := createUnknown(t, e, "k-skew-lag", createBody("pedido-skew-lag", 2000))
		drop.Remove()
		id := p["id"].(string)
		sent := len(opRequests(e.Sim, "authorize"))
		// The search cannot see the intent either: only the clock tells.
		e.Sim.SetSearchLag(3 * time.Hour)
		e.Sim.Advance(2 * time.Hour)
		e.Clock.Advance(time.Minute)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{}, 1)
		if got := getPaymentJSON(t, e, id); got["status"] != "unknown" {
			t.Fatalf("payment = %v, want unknown while the search grace runs", got)
		}
		if n := len(opRequests(e.Sim, "authorize")); n != sent {
			t.Fatalf("the key was re-sent %d times with the provider's clock past its window", n-sent)
		}
		wantEffects(t, e.Sim, 1)

		e.Sim.SetSearchLag(0)
		e.Clock.Advance(time.Minute)
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
		if got := getPaymentJSON(t, e, id); got["status"] != "authorized" {
			t.Fatalf("payment = %v, want authorized once the search sees the intent", got)
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("ClocksAgreeAndTheKeyIsResent", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{KeyRetention: time.Hour, SearchGrace: 2 * time.Minute})
		drop := dropAuthorize(e)
		p := createUnknown(t, e, "k-noskew-lag", createBody("pedido-noskew-lag", 2000))
		drop.Remove()
		sent := len(opRequests(e.Sim, "authorize"))
		e.Sim.SetSearchLag(time.Hour)
		e.Clock.Advance(time.Minute)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
		if got := getPaymentJSON(t, e, p["id"].(string)); got["status"] != "authorized" {
			t.Fatalf("payment = %v, want authorized by the key's replay", got)
		}
		if n := len(opRequests(e.Sim, "authorize")); n != sent+1 {
			t.Fatalf("%d re-sends, want 1: inside the window on both clocks the key is replayed", n-sent)
		}
		wantEffects(t, e.Sim, 1)
	})
}
