package mercadopago

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// basePath is where the fake serves the API, to prove that the adapter
// keeps MERCADOPAGO_API_BASE's path and not only its host.
const basePath = "/mp"

var creds = provider.Credentials{SecretKey: "APP_USR-test-token"}

// seen is one request as the fake received it.
type seen struct {
	method, path, query string
	header              http.Header
	body                map[string]any
}

// fakeMP mimics the parts of Mercado Pago's API the adapter uses. answer
// decides each reply; hangup, when it returns true, closes the connection
// without a reply instead (a broken keep-alive connection).
type fakeMP struct {
	answer func(s seen) (int, string)
	hangup func(s seen) bool
	hang   bool

	mu   sync.Mutex
	reqs []seen
}

func (f *fakeMP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	s := seen{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone()}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &s.body)
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, s)
	f.mu.Unlock()
	if f.hang {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return
	}
	if f.hangup != nil && f.hangup(s) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	status, body := http.StatusOK, `{}`
	if f.answer != nil {
		status, body = f.answer(s)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req-fake")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (f *fakeMP) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func (f *fakeMP) last(t *testing.T) seen {
	t.Helper()
	r := f.requests()
	if len(r) == 0 {
		t.Fatal("the fake saw no request")
	}
	return r[len(r)-1]
}

var fixedNow = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func newFake(t *testing.T, f *fakeMP) *Provider {
	t.Helper()
	return newFakeWith(t, f, Config{})
}

// newFakeWith is newFake with settings of the test's.
func newFakeWith(t *testing.T, f *fakeMP, cfg Config) *Provider {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg.APIBase, cfg.Now = srv.URL+basePath, func() time.Time { return fixedNow }
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// always answers every request with one status and body.
func always(status int, body string) func(seen) (int, string) {
	return func(seen) (int, string) { return status, body }
}

// paymentJSON is a payment as Mercado Pago returns it, with extra fields
// merged in.
func paymentJSON(status, detail string, extra string) string {
	body := `{"id":123,"status":"` + status + `","status_detail":"` + detail + `",
"transaction_amount":10.5,"currency_id":"BRL","captured":false,"external_reference":"pay_1:1",
"date_created":"2026-12-04T08:00:00.000-04:00",
"metadata":{"payment_id":"pay_1","order_id":"pedido-842","attempt":"1"}`
	if extra != "" {
		body += "," + extra
	}
	return body + "}"
}

func cardReq() provider.AuthorizeRequest {
	return provider.AuthorizeRequest{
		IdempotencyKey: "pedido-842:autorizar-v1",
		Amount:         1050,
		Currency:       "BRL",
		CaptureMethod:  "manual",
		Description:    "pedido 842",
		Metadata:       map[string]string{"payment_id": "pay_1", "order_id": "pedido-842", "attempt": "1"},
		BillingDetails: &provider.BillingDetails{Email: "ana@example.com"},
		MercadoPago:    &provider.MercadoPagoCard{Token: "tok_card", PaymentMethodID: "visa", Installments: 3},
	}
}

func pixReq() provider.AuthorizeRequest {
	r := cardReq()
	r.MercadoPago, r.PaymentMethod, r.CaptureMethod, r.ExpiresIn = nil, provider.MethodPix, "automatic", 1800
	return r
}

func boletoReq() provider.AuthorizeRequest {
	r := cardReq()
	r.MercadoPago, r.PaymentMethod, r.CaptureMethod, r.ExpiresIn = nil, provider.MethodBoleto, "automatic", 5
	r.BillingDetails = &provider.BillingDetails{Name: "Ana Maria Souza", Email: "ana@example.com", TaxID: "529.982.247-25",
		Address: provider.Address{Line1: "Av. Paulista, 1000", City: "São Paulo", State: "sp", PostalCode: "01310-100", Country: "BR"}}
	return r
}

// wantPath checks a request's method and path below the base path.
func wantPath(t *testing.T, s seen, method, path string) {
	t.Helper()
	if s.method != method || s.path != basePath+path {
		t.Fatalf("request %s %s, want %s %s", s.method, s.path, method, basePath+path)
	}
	if !strings.HasPrefix(s.header.Get("Authorization"), "Bearer ") {
		t.Fatalf("no bearer token")
	}
}
