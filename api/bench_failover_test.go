package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/app"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/providertest"
	"github.com/acmepay/payments/internal/provider/stripe"
)

// BenchmarkCreateFailover measures what a failover adds to a create: a
// Mercado Pago card created directly, after Stripe refused the connection
// (attempt 1 failed, attempt 2 at Mercado Pago), and while Stripe's circuit
// is open (straight to Mercado Pago, no attempt at Stripe). p50-ms and
// p99-ms are per create.
func BenchmarkCreateFailover(b *testing.B) {
	// Stripe at an address that refuses connections, with production's
	// client retries: each refused try is retried after stripe-go's backoff.
	refused := apitest.WrapStripe(func(provider.Provider) provider.Provider {
		return stripe.New(stripe.Config{APIBase: providertest.ClosedURL(b), MaxNetworkRetries: app.DefaultProviderRetries})
	})
	for _, tc := range []struct {
		name    string
		opts    apitest.Options
		methods string
		attempt float64
	}{
		{"direct", apitest.Options{}, `{"mercadopago":{"token":"tok_APRO","payment_method_id":"visa"}}`, 1},
		{"failover", apitest.Options{WrapProvider: refused, CircuitFailures: 1 << 30}, bothMethods, 2},
		{"circuit-open", apitest.Options{WrapProvider: refused, CircuitFailures: 1, CircuitCooldown: time.Hour}, bothMethods, 1},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := apitest.New(b, tc.opts)
			if _, err := e.Accounts.SetProvider(context.Background(), e.Account.ID, payment.ProviderMercadoPago,
				account.Secrets{MercadoPagoToken: "TEST-bench-" + apitest.SecretSuffix(b)}); err != nil {
				b.Fatal(err)
			}
			body := func(order string) string {
				return fmt.Sprintf(`{"order_id":%q,"amount":2500,"currency":"BRL","payment_methods":%s,%s}`, order, tc.methods, mpBilling)
			}
			if tc.name == "circuit-open" {
				// One proof opens the circuit; every create after it skips Stripe.
				if r := create(e, "bench-open", body("bench-open")); r.Status != http.StatusCreated {
					b.Fatalf("status %d: %s", r.Status, r.Body)
				}
			}
			var took []time.Duration
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				r := create(e, fmt.Sprintf("bench-%d", i), body(fmt.Sprintf("bench-order-%d", i)))
				took = append(took, time.Since(start))
				if r.Status != http.StatusCreated || r.JSON(b)["attempt"] != tc.attempt {
					b.Fatalf("status %d: %s", r.Status, r.Body)
				}
			}
			slices.Sort(took)
			ms := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))]) / 1e6 }
			b.ReportMetric(ms(0.50), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
		})
	}
}

const bothMethods = `{"stripe":"pm_card_visa","mercadopago":{"token":"tok_APRO","payment_method_id":"visa"}}`
