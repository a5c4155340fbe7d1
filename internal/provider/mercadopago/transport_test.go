package mercadopago

import (
	"net/http"
	"testing"

	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/providertest"
)

// TestTransport: what a call's transport did decides whether Mercado Pago
// was reached (CONTRACT §15).
func TestTransport(t *testing.T) {
	t.Parallel()
	providertest.RunTransport(t, func(t *testing.T, base string, client *http.Client) provider.Provider {
		p, err := New(Config{APIBase: base, HTTPClient: client})
		if err != nil {
			t.Fatalf("new: %v", err)
		}
		return p
	})
}
