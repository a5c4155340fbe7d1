package stripe

import (
	"testing"

	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/providertest"
)

// TestConformanceStripeMock runs the provider suite against stripe-mock,
// which checks every request against Stripe's OpenAPI spec but answers from
// fixtures: the subtests that need state skip, each saying why.
func TestConformanceStripeMock(t *testing.T) {
	t.Parallel()
	base := stripeMock(t)
	// Retries as in production, so a single send is shown to stay single.
	at := func(baseURL string) provider.Provider {
		return New(Config{APIBase: baseURL, MaxNetworkRetries: 2})
	}
	providertest.Run(t, func(*testing.T) providertest.Harness {
		return providertest.Harness{Provider: at(base), Credentials: creds, ProviderAt: at, Fixtures: providertest.StripeFixtures}
	})
}
