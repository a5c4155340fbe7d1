package providersim_test

import (
	"net/http/httptest"
	"testing"

	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/provider/providertest"
	"github.com/acmepay/payments/internal/provider/stripe"
)

// TestConformance runs the provider suite through the real Stripe adapter
// against the simulator, so the simulator answers as the adapter expects of
// Stripe and the adapter's answers hold where the backend keeps state.
func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, func(t *testing.T) providertest.Harness {
		sim := providersim.New(providersim.Options{})
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		t.Cleanup(sim.ClearFaults) // runs first, so held requests cannot block Close
		const key = "sk_test_conformance"
		// Retries as in production, so a single send is shown to stay single.
		at := func(baseURL string) provider.Provider {
			return stripe.New(stripe.Config{APIBase: baseURL, MaxNetworkRetries: 2})
		}
		return providertest.Harness{
			Provider:    at(srv.URL),
			Credentials: provider.Credentials{SecretKey: key},
			Stateful:    true,
			Effects: func() providertest.Effects {
				st := sim.StatsFor(key)
				return providertest.Effects{Authorizations: st.Authorizations, Declines: st.Declines,
					Captures: st.Captures, Cancels: st.Cancels, Refunds: st.Refunds}
			},
			RevokeCredentials: func() func() {
				sim.RevokeSecret(key)
				return func() { sim.RestoreSecret(key) }
			},
			ProviderAt: at,
			Fixtures:   providertest.StripeFixtures,
		}
	})
}
