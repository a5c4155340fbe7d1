package payment

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

func TestNormalizeTaxID(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"529.982.247-25": true, "52998224725": true, "11.222.333/0001-81": true, "11222333000181": true,
		"529.982.247-24": false, "52998224715": false, "11.222.333/0001-80": false, "11111111111": false,
		"00000000000000": false, "5299822472": false, "529 982 247 25": false, "": false,
	} {
		if _, ok := NormalizeTaxID(in); ok != want {
			t.Errorf("NormalizeTaxID(%q) ok = %v, want %v", in, ok, want)
		}
	}
}

const boletoBilling = `"billing_details":{"name":"Ana","email":"ana@example.com","tax_id":"529.982.247-25",` +
	`"address":{"line1":"Rua A, 1","city":"São Paulo","state":"SP","postal_code":"01310-100","country":"BR"}}`

func TestParseCreateRequestMethods(t *testing.T) {
	t.Parallel()
	base := `"order_id":"pedido-1","amount":2000,"currency":"BRL"`
	ok := func(body string) CreateRequest {
		t.Helper()
		r, err := ParseCreateRequest([]byte("{" + base + "," + body + "}"))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return r
	}
	if r := ok(`"payment_method":"pix"`); r.ExpiresIn != PixExpiresDefault || r.CaptureMethod != "automatic" {
		t.Errorf("pix defaults: %+v", r)
	}
	if r := ok(`"payment_method":"boleto",` + boletoBilling); r.ExpiresIn != BoletoExpiresDefault || r.BillingDetails.TaxID != "52998224725" {
		t.Errorf("boleto defaults: %+v", r)
	}
	if r := ok(`"payment_method":"pm_card_threeDSecure2Required","return_url":"https://shop.example/back"`); r.ReturnURL == "" || r.ExpiresIn != 0 {
		t.Errorf("card with return_url: %+v", r)
	}
	ok(`"payment_method":"pix","return_url":"http://localhost:8080/back","expires_in":86400`)
	// Mercado Pago needs only the payer's email: a Pix or a card may carry
	// just that; a Boleto needs them whole.
	if r := ok(`"payment_method":"pix","billing_details":{"email":"ana@example.com"}`); r.BillingDetails.Email != "ana@example.com" || r.BillingDetails.Name != "" {
		t.Errorf("pix with an email only: %+v", r.BillingDetails)
	}
	ok(`"payment_method":"pm_card_visa","billing_details":{"email":"ana@example.com","tax_id":"529.982.247-25"}`)
	// A card payment's fingerprint input is what it was before these fields.
	if r := ok(`"payment_method":"pm_card_visa"`); r.ReturnURL != "" || r.ExpiresIn != 0 || r.BillingDetails != nil {
		t.Errorf("card: %+v", r)
	}

	for body, field := range map[string]string{
		`"payment_method":"pix","capture_method":"manual"`:                               "capture_method",
		`"payment_method":"boleto","capture_method":"manual",` + boletoBilling:           "capture_method",
		`"payment_method":"pix","expires_in":59`:                                         "expires_in",
		`"payment_method":"pix","expires_in":86401`:                                      "expires_in",
		`"payment_method":"boleto","expires_in":61,` + boletoBilling:                     "expires_in",
		`"payment_method":"pm_card_visa","expires_in":60`:                                "expires_in",
		`"payment_method":"boleto"`:                                                      "billing_details",
		`"payment_method":"boleto",` + strings.Replace(boletoBilling, "-25", "-24", 1):   "billing_details.tax_id",
		`"payment_method":"boleto",` + strings.Replace(boletoBilling, `"BR"`, `"br"`, 1): "billing_details.address.country",
		`"payment_method":"pix","return_url":"http://shop.example/back"`:                 "return_url",
		`"payment_method":"pix","return_url":"/back"`:                                    "return_url",
		`"payment_method":"pix","return_url":null`:                                       "return_url",
		`"payment_method":"pix","billing_details":{"name":"A","nick":"b"}`:               "billing_details.nick",
		`"payment_method":"boleto","billing_details":{"email":"ana@example.com"}`:        "billing_details.name",
		`"payment_method":"pix","billing_details":{"email":"ana"}`:                       "billing_details.email",
		`"payment_method":"pix","billing_details":{"email":" "}`:                         "billing_details.email",
		`"payment_method":"pix","billing_details":{"tax_id":"123"}`:                      "billing_details.tax_id",
		`"payment_method":"pix","billing_details":{"address":{"line1":"Rua X, 1"}}`:      "billing_details.address.city",
	} {
		_, err := ParseCreateRequest([]byte("{" + base + "," + body + "}"))
		e, isErr := err.(*Error)
		if !isErr || e.Code != CodeInvalidRequest || len(e.Fields) == 0 || e.Fields[0].Field != field {
			t.Errorf("%s: got %v, want a problem with %s", body, err, field)
		}
	}
}

// TestWaitingSchedule: a waiting payment is polled with backoff, never
// later than just after its expiry, and soon once expired.
func TestWaitingSchedule(t *testing.T) {
	t.Parallel()
	s := &Service{waitPoll: time.Minute, waitMaxBackoff: time.Hour}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	exp := now.Add(10 * time.Minute)
	for _, c := range []struct {
		name   string
		status Status
		expiry *time.Time
		tries  int
		want   time.Duration
	}{
		{"first poll", StatusRequiresAction, nil, 0, time.Minute},
		{"backoff doubles", StatusRequiresAction, nil, 3, 8 * time.Minute},
		{"backoff capped", StatusPending, nil, 40, time.Hour},
		{"before expiry", StatusRequiresAction, &exp, 0, time.Minute},
		{"not past the expiry", StatusRequiresAction, &exp, 5, 10*time.Minute + expiryGrace},
		{"pending does not expire", StatusPending, &exp, 5, 32 * time.Minute},
	} {
		p := &Payment{Status: c.status, ActionExpiresAt: c.expiry}
		if got := s.waitingNext(p, &Attempt{ReconcileTries: c.tries}, now).Sub(now); got != c.want {
			t.Errorf("%s: next poll in %v, want %v", c.name, got, c.want)
		}
	}
	past := now.Add(-time.Minute)
	p := &Payment{Status: StatusRequiresAction, ActionExpiresAt: &past}
	if got := s.waitingNext(p, &Attempt{ReconcileTries: 9}, now).Sub(now); got != time.Minute {
		t.Errorf("expired: next poll in %v, want 1m", got)
	}
}

// An authorization attempt's request carries the Pix or Boleto expiry fixed
// when the attempt is built, so that every send of it is the same body; a
// card's request carries none, and reads as requests stored before did.
func TestAuthorizeAttemptFixesExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 0, 123456789, time.UTC)
	s := mpService(t, &profiled{}, &profiled{}, now.Add(time.Hour))
	for _, c := range []struct {
		method    string
		expiresIn int64
		want      time.Time
	}{
		{MethodPix, 600, now.Add(10 * time.Minute)},
		{MethodBoleto, 5, now.AddDate(0, 0, 5)},
		{"pm_card_visa", 0, time.Time{}},
	} {
		p := &Payment{ID: "pay_1", OrderID: "pedido-1", Amount: 5000, Currency: "BRL", PaymentMethod: c.method,
			Provider: ProviderMercadoPago, Options: MethodOptions{ExpiresIn: c.expiresIn}}
		a, err := s.newAuthorizeAttempt(p, "att_1", 1, now)
		if err != nil {
			t.Fatal(err)
		}
		var req provider.AuthorizeRequest
		if err := json.Unmarshal(a.Request, &req); err != nil {
			t.Fatal(err)
		}
		if !req.ExpiresAt.Equal(c.want) || req.ExpiresIn != c.expiresIn {
			t.Errorf("%s: ExpiresAt %v ExpiresIn %d, want %v and %d", c.method, req.ExpiresAt, req.ExpiresIn, c.want, c.expiresIn)
		}
		if c.want.IsZero() && strings.Contains(string(a.Request), "ExpiresAt") {
			t.Errorf("%s: request %s carries an expiry", c.method, a.Request)
		}
	}
}
