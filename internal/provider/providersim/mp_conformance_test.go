package providersim_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/mercadopago"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/provider/providertest"
)

// mpFixtures are the Mercado Pago side of the suite's requests.
var mpFixtures = providertest.Fixtures{
	// A card is the token Mercado Pago's frontend made; the simulator's
	// tok_<NAME> pays as the test cardholder NAME: APRO is approved, OTHE
	// rejected (cc_rejected_other_reason). Every payment needs the payer's
	// email.
	Card: func(req *provider.AuthorizeRequest, declined bool) {
		token := "tok_APRO"
		if declined {
			token = "tok_OTHE"
		}
		req.MercadoPago = &provider.MercadoPagoCard{Token: token, PaymentMethodID: "visa", Installments: 1}
		req.BillingDetails = &provider.BillingDetails{Email: "buyer@example.com"}
	},
	DeclineCode: "cc_rejected_other_reason",
	// Payment ids are numbers; the adapter answers ErrNotFound for any
	// other id without asking, which would prove nothing about the server.
	// The simulator counts its ids up from 1300000001, never this far.
	MissingID: func(string) string { return "9999999999" },
	// The adapter searches external_reference "<payment id>:<attempt>";
	// a bare payment id is ErrAttemptNeeded. The suite authorizes attempt 1.
	SearchRef: func(paymentID string) string { return paymentID + ":1" },
	// Mercado Pago keeps no metadata on refunds.
	RefundMetadata: false,
	// A rejected payment is final: it cannot be paid again, and Mercado
	// Pago refuses to cancel it.
	DeclineStaysOpen: false,
}

// TestMPConformance runs the provider suite through the Mercado Pago adapter
// against the simulator, once as the service runs by default (no key
// retention counted on, MERCADOPAGO_KEY_RETENTION=0s, and a simulator that
// keeps none) and once with a retention both sides agree on, so the
// subtests of re-sent keys run too.
func TestMPConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		retention time.Duration
	}{
		{"NoKeyRetention", 0},
		{"KeyRetention24h", 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			providertest.Run(t, func(t *testing.T) providertest.Harness { return mpHarness(t, tc.retention) })
		})
	}
}

// mpHarness starts a simulator that keeps Mercado Pago keys for retention
// and an adapter whose profile says the same.
func mpHarness(t *testing.T, retention time.Duration) providertest.Harness {
	sim := providersim.New(providersim.Options{})
	sim.SetMPKeyRetention(retention) // Options take 0 as the default, 24h
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(sim.ClearFaults) // runs first, so held requests cannot block Close
	// Any TEST- or APP_USR- token is a Mercado Pago account of its own.
	const token = "TEST-conformance"
	at := func(baseURL string) provider.Provider {
		p, err := mercadopago.New(mercadopago.Config{APIBase: baseURL, KeyRetention: retention})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return providertest.Harness{
		Provider:    at(srv.URL),
		Credentials: provider.Credentials{SecretKey: token},
		Stateful:    true,
		Effects: func() providertest.Effects {
			st := sim.StatsFor(token)
			return providertest.Effects{Authorizations: st.Authorizations, Declines: st.Declines,
				Captures: st.Captures, Cancels: st.Cancels, Refunds: st.Refunds}
		},
		RevokeCredentials: func() func() {
			sim.RevokeSecret(token)
			return func() { sim.RestoreSecret(token) }
		},
		ProviderAt: at,
		Fixtures:   mpFixtures,
	}
}
