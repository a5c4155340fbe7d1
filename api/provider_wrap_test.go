package api_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

// callLog wraps one provider adapter and records the provider keys of the
// authorizations and cancels it is asked to send.
type callLog struct {
	provider.Provider
	mu   sync.Mutex
	keys []string
}

func (c *callLog) add(op, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys = append(c.keys, op+" "+key)
}

func (c *callLog) sent() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.keys...)
}

func (c *callLog) Authorize(ctx context.Context, cr provider.Credentials, r provider.AuthorizeRequest) provider.Result {
	c.add("authorize", r.IdempotencyKey)
	return c.Provider.Authorize(ctx, cr, r)
}

func (c *callLog) Cancel(ctx context.Context, cr provider.Credentials, r provider.CancelRequest) provider.Result {
	c.add("cancel", r.IdempotencyKey)
	return c.Provider.Cancel(ctx, cr, r)
}

// SearchIntentByAttempt keeps Mercado Pago's search by attempt visible
// through the wrapper.
func (c *callLog) SearchIntentByAttempt(ctx context.Context, cr provider.Credentials, paymentID string, attempt int) (*provider.Intent, error) {
	if as, ok := c.Provider.(provider.AttemptSearcher); ok {
		return as.SearchIntentByAttempt(ctx, cr, paymentID, attempt)
	}
	return c.Provider.SearchIntentByPaymentID(ctx, cr, paymentID)
}

// TestWrapProviderWrapsEveryProvider: the seam hands each adapter to the
// test under its name, so a Mercado Pago payment's calls are seen by the
// wrapper of Mercado Pago's adapter, and a Stripe payment's by Stripe's.
func TestWrapProviderWrapsEveryProvider(t *testing.T) {
	t.Parallel()
	logs := map[string]*callLog{}
	var mu sync.Mutex
	e := apitest.New(t, apitest.Options{WrapProvider: func(name string, p provider.Provider) provider.Provider {
		mu.Lock()
		defer mu.Unlock()
		if logs[name] != nil {
			t.Errorf("%s wrapped twice by one instance", name)
		}
		logs[name] = &callLog{Provider: p}
		return logs[name]
	}})
	mp, st := logs[payment.ProviderMercadoPago], logs[payment.ProviderStripe]
	if mp == nil || st == nil {
		t.Fatalf("wrapped %v, want both stripe and mercadopago", reflect.ValueOf(logs).MapKeys())
	}

	m := mpMerchant(e)
	p := createAt(t, e, m, "k-wrap-pix", fmt.Sprintf(mpPixBody, "pedido-wrap-pix"))
	if p["provider"] != "mercadopago" || p["status"] != "requires_action" {
		t.Fatalf("pix payment = %v", p)
	}
	if _, err := e.Payments.Cancel(context.Background(), m, "k-wrap-cancel", p["id"].(string)); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if got, want := mp.sent(), []string{"authorize pedido-wrap-pix:autorizar-v1", "cancel pedido-wrap-pix:cancelar-v1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("mercadopago wrapper saw %q, want %q", got, want)
	}
	if got := st.sent(); len(got) != 0 {
		t.Fatalf("stripe wrapper saw %q for a Mercado Pago payment", got)
	}

	wantStatus(t, create(e, "k-wrap-card", createBody("pedido-wrap-card", 2000)), http.StatusCreated)
	if got, want := st.sent(), []string{"authorize pedido-wrap-card:autorizar-v1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("stripe wrapper saw %q, want %q", got, want)
	}
	if n := len(mp.sent()); n != 2 {
		t.Fatalf("mercadopago wrapper saw %d calls after a Stripe payment, want still 2", n)
	}
}
