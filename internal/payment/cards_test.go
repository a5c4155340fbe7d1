package payment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// payment_methods: each entry validated, installments defaulted so that
// leaving them out is the same request as sending 1, exactly one of
// payment_method and payment_methods, card data never accepted.
func TestParsePaymentMethods(t *testing.T) {
	t.Parallel()
	const head = `{"order_id":"o","amount":100,"currency":"BRL",`
	for _, tc := range []struct {
		body      string
		wantField string // "" when valid
	}{
		{`"payment_methods":{"mercadopago":{"token":"tok_APRO","payment_method_id":"visa"}}}`, ""},
		{`"payment_methods":{"stripe":"pm_card_visa"}}`, ""},
		{`"payment_methods":{"stripe":"pm_card_visa","mercadopago":{"token":"tok_APRO","payment_method_id":"master","installments":12}}}`, ""},
		{`"payment_method":"pm_card_visa","payment_methods":{"stripe":"pm_card_visa"}}`, "payment_methods"},
		{`"payment_methods":{}}`, "payment_methods"},
		{`"payment_methods":{"stripe":"4242424242424242"}}`, "payment_methods.stripe"},
		{`"payment_methods":{"stripe":"pm card"}}`, "payment_methods.stripe"},
		{`"payment_methods":{"mercadopago":{"payment_method_id":"visa"}}}`, "payment_methods.mercadopago.token"},
		{`"payment_methods":{"mercadopago":{"token":"4111111111111111","payment_method_id":"visa"}}}`, "payment_methods.mercadopago.token"},
		{`"payment_methods":{"mercadopago":{"token":"tok_APRO"}}}`, "payment_methods.mercadopago.payment_method_id"},
		{`"payment_methods":{"mercadopago":{"token":"tok_APRO","payment_method_id":"Visa!"}}}`, "payment_methods.mercadopago.payment_method_id"},
		{`"payment_methods":{"mercadopago":{"token":"tok_APRO","payment_method_id":"visa","installments":0}}}`, "payment_methods.mercadopago.installments"},
		{`"payment_methods":{"mercadopago":{"token":"tok_APRO","payment_method_id":"visa","installments":25}}}`, "payment_methods.mercadopago.installments"},
		{`"payment_methods":{"mercadopago":{"token":"tok_APRO","payment_method_id":"visa","installments":1.5}}}`, "payment_methods.mercadopago.installments"},
	} {
		r, err := ParseCreateRequest([]byte(head + tc.body))
		if tc.wantField == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.body, err)
			} else if r.Method() != MethodCard || r.PaymentMethod != "" {
				t.Errorf("%s: method %q, payment_method %q", tc.body, r.Method(), r.PaymentMethod)
			}
			continue
		}
		e, ok := err.(*Error)
		if !ok || e.Code != CodeInvalidRequest || len(e.Fields) == 0 || e.Fields[0].Field != tc.wantField {
			t.Errorf("%s: err %v, want invalid_request on %s", tc.body, err, tc.wantField)
			continue
		}
		if strings.Contains(fmt.Sprint(e.Fields), "4242424242424242") || strings.Contains(fmt.Sprint(e.Fields), "4111111111111111") {
			t.Errorf("%s: card data echoed: %v", tc.body, e.Fields)
		}
	}
	// Unknown fields inside are refused like anywhere else.
	if _, err := ParseCreateRequest([]byte(head + `"payment_methods":{"mercadopago":{"token":"t","payment_method_id":"visa","cvv":"123"}}}`)); ErrorCode(err) != CodeInvalidRequest {
		t.Fatalf("unknown field: err %v", err)
	}

	a, err := fingerprint(t, head+`"payment_methods":{"mercadopago":{"token":"tok_APRO","payment_method_id":"visa"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := fingerprint(t, head+`"payment_methods":{"mercadopago":{"installments":1,"payment_method_id":"visa","token":"tok_APRO"}}}`)
	c, _ := fingerprint(t, head+`"payment_methods":{"mercadopago":{"token":"tok_APRO","payment_method_id":"visa","installments":2}}}`)
	d, _ := fingerprint(t, head+`"payment_methods":{"stripe":"pm_card_visa","mercadopago":{"token":"tok_APRO","payment_method_id":"visa"}}}`)
	if !bytes.Equal(a, b) || bytes.Equal(a, c) || bytes.Equal(a, d) {
		t.Fatalf("fingerprints: default installments same %v, other installments differ %v, extra entry differs %v",
			bytes.Equal(a, b), !bytes.Equal(a, c), !bytes.Equal(a, d))
	}
	// A card request's fingerprint is what it was before payment_methods.
	old, _ := fingerprint(t, head+`"payment_method":"pm_card_visa"}`)
	r, _ := ParseCreateRequest([]byte(head + `"payment_method":"pm_card_visa"}`))
	if enc := mustJSON(r); strings.Contains(enc, "payment_methods") || len(old) == 0 {
		t.Fatalf("a bare token's canonical form names payment_methods: %s", enc)
	}
}

// Each attempt sends its own provider's entry of payment_methods.
func TestAuthorizeAttemptTakesItsProvidersCard(t *testing.T) {
	t.Parallel()
	s := &Service{lease: time.Minute}
	card := &provider.MercadoPagoCard{Token: "tok_APRO", PaymentMethodID: "visa", Installments: 3}
	p := &Payment{ID: "pay_1", OrderID: "o", Amount: 100, Currency: "BRL", PaymentMethod: MethodCard,
		Options: MethodOptions{Methods: &PaymentMethods{Stripe: "pm_card_visa", MercadoPago: card}}}
	for _, tc := range []struct {
		at        string
		wantToken string
		wantMP    *provider.MercadoPagoCard
	}{{ProviderStripe, "pm_card_visa", nil}, {ProviderMercadoPago, MethodCard, card}} {
		p.Provider = tc.at
		a, err := s.newAuthorizeAttempt(p, "att_1", 1, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var r provider.AuthorizeRequest
		if err := json.Unmarshal(a.Request, &r); err != nil {
			t.Fatal(err)
		}
		if r.PaymentMethod != tc.wantToken || (r.MercadoPago == nil) != (tc.wantMP == nil) || (r.MercadoPago != nil && *r.MercadoPago != *tc.wantMP) {
			t.Fatalf("at %s: payment_method %q, mercadopago %+v", tc.at, r.PaymentMethod, r.MercadoPago)
		}
	}
}

// A failover needs the attempt still unresolved under this request's own
// lease: a twin that took it over may have re-sent its key.
func TestStillOurs(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	later := at.Add(time.Minute)
	mine := &Attempt{Status: AttemptProcessing, LeaseExpiresAt: &at}
	for _, tc := range []struct {
		name   string
		stored *Attempt
		want   bool
	}{
		{"our lease", &Attempt{Status: AttemptProcessing, LeaseExpiresAt: &at}, true},
		{"taken over", &Attempt{Status: AttemptProcessing, LeaseExpiresAt: &later}, false},
		{"resolved meanwhile", &Attempt{Status: AttemptSucceeded, LeaseExpiresAt: &at}, false},
		{"no lease", &Attempt{Status: AttemptProcessing}, false},
	} {
		if got := stillOurs(mine, tc.stored); got != tc.want {
			t.Errorf("%s: stillOurs = %v, want %v", tc.name, got, tc.want)
		}
	}
}
