package metrics

import (
	"testing"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

// series gathers one metric's series whose labels include want, and
// returns their sum and how many there are.
func series(t *testing.T, m *Metrics, name string, want map[string]string) (sum float64, n int) {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, s := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			n++
			sum += s.GetCounter().GetValue() + s.GetGauge().GetValue()
		}
	}
	return sum, n
}

// The provider label takes its values from a fixed set: a name outside it
// is counted as other, never as a series of its own.
func TestProviderLabelIsAFixedSet(t *testing.T) {
	t.Parallel()
	m := New(nil, nil, nil)
	m.ProviderCall("mercadopago", payment.OpAuthorize, provider.Succeeded, time.Millisecond)
	m.ProviderCall("paypal", payment.OpAuthorize, provider.Succeeded, time.Millisecond)
	m.ProviderCall("", payment.OpAuthorize, provider.Succeeded, time.Millisecond)
	m.Webhook("paypal\x00", "rejected")
	m.PaymentTransition("Stripe", payment.StatusProcessing, payment.StatusAuthorized)
	m.ReconcileResolution("adyen", "authorized")
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"payments_provider_calls_total", map[string]string{"provider": "mercadopago", "outcome": "succeeded"}, 1},
		{"payments_provider_calls_total", map[string]string{"provider": "other", "outcome": "succeeded"}, 2},
		{"payments_webhook_deliveries_total", map[string]string{"provider": "other", "outcome": "rejected"}, 1},
		{"payments_status_transitions_total", map[string]string{"provider": "other"}, 1},
		{"payments_reconciler_resolutions_total", map[string]string{"provider": "other"}, 1},
	} {
		if got, _ := series(t, m, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, name := range []string{"payments_provider_calls_total", "payments_provider_call_duration_seconds",
		"payments_status_transitions_total", "payments_webhook_deliveries_total", "payments_reconciler_resolutions_total"} {
		for _, bad := range []string{"paypal", "", "Stripe", "adyen", "paypal\x00"} {
			if _, n := series(t, m, name, map[string]string{"provider": bad}); n != 0 {
				t.Errorf("%s has %d series of provider %q", name, n, bad)
			}
		}
	}

	// A gauge by provider shows every known provider, and other only
	// while some name outside the set has a count.
	m.ReconcileNeedsAttention(map[string]int{"stripe": 2, "paypal": 1, "adyen": 1})
	if got, _ := series(t, m, "payments_reconciler_attempts_needing_attention", map[string]string{"provider": "other"}); got != 2 {
		t.Errorf("needing attention at other = %v, want 2", got)
	}
	m.ReconcileNeedsAttention(map[string]int{"stripe": 2})
	if _, n := series(t, m, "payments_reconciler_attempts_needing_attention", nil); n != len(Providers) {
		t.Errorf("%d needing-attention series, want one per known provider (%d)", n, len(Providers))
	}
	if got, n := series(t, m, "payments_reconciler_attempts_needing_attention", map[string]string{"provider": "mercadopago"}); got != 0 || n != 1 {
		t.Errorf("needing attention at mercadopago = %v (%d series), want one series at 0", got, n)
	}
}
