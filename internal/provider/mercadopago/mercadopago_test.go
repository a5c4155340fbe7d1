package mercadopago

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

const key = "pedido-842:autorizar-v1"

// TestAuthorizeCardManualSendsCaptureFalse: sdk-go drops capture:false
// (omitempty) and Mercado Pago would then capture at once; the server must
// see it.
func TestAuthorizeCardManualSendsCaptureFalse(t *testing.T) {
	t.Parallel()
	f := &fakeMP{answer: always(201, paymentJSON("authorized", "pending_capture", ""))}
	p := newFake(t, f)
	res := p.Authorize(context.Background(), creds, cardReq())
	if res.Answer != provider.AnswerObject || res.Resent || res.Intent == nil {
		t.Fatalf("result %+v, want the object, sent once", res)
	}
	if in := res.Intent; in.ID != "123" || in.State != provider.IntentAuthorized || in.Amount != 1050 ||
		in.AmountCapturable != 1050 || in.Currency != "brl" || in.Metadata["payment_id"] != "pay_1" {
		t.Fatalf("intent %+v", in)
	}
	s := f.last(t)
	wantPath(t, s, http.MethodPost, "/v1/payments")
	if got := s.header.Get("X-Idempotency-Key"); got != key {
		t.Fatalf("X-Idempotency-Key %q, want %q", got, key)
	}
	capture, present := s.body["capture"]
	if !present || capture != false {
		t.Fatalf("body capture = %v (present %v), want false: %v", capture, present, s.body)
	}
	want := map[string]any{
		"token": "tok_card", "payment_method_id": "visa", "installments": 3.0, "three_d_secure_mode": "optional",
		"external_reference": "pay_1:1", "transaction_amount": 10.5, "description": "pedido 842",
	}
	for k, v := range want {
		if s.body[k] != v {
			t.Errorf("body %s = %v, want %v", k, s.body[k], v)
		}
	}
	if payer, _ := s.body["payer"].(map[string]any); payer["email"] != "ana@example.com" {
		t.Errorf("payer %v, want the billing email", s.body["payer"])
	}
	if md, _ := s.body["metadata"].(map[string]any); md["attempt"] != "1" || md["order_id"] != "pedido-842" {
		t.Errorf("metadata %v", s.body["metadata"])
	}
}

func TestAuthorizeAutomaticSendsCaptureTrue(t *testing.T) {
	t.Parallel()
	f := &fakeMP{answer: always(201, paymentJSON("approved", "accredited", `"captured":true`))}
	p := newFake(t, f)
	r := cardReq()
	r.CaptureMethod = "automatic"
	res := p.Authorize(context.Background(), creds, r)
	if res.Answer != provider.AnswerObject || res.Intent.State != provider.IntentCaptured || res.Intent.AmountReceived != 1050 {
		t.Fatalf("result %+v intent %+v", res, res.Intent)
	}
	if got := f.last(t).body["capture"]; got != true {
		t.Fatalf("capture %v, want true", got)
	}
}

// TestKeyOnMutatingCallsOnly: every non-GET carries the derived key, never
// one of sdk-go's random ones; GETs carry none.
func TestKeyOnMutatingCallsOnly(t *testing.T) {
	t.Parallel()
	f := &fakeMP{answer: func(s seen) (int, string) {
		switch {
		case s.path == basePath+"/v1/payments/123/refunds" && s.method == http.MethodPost:
			return 201, `{"id":9,"payment_id":123,"amount":4,"status":"approved"}`
		case s.path == basePath+"/v1/payments/123/refunds":
			return 200, `[{"id":9,"payment_id":123,"amount":4,"status":"approved"}]`
		case s.path == basePath+"/v1/payments/search":
			return 200, `{"paging":{"total":1},"results":[` + paymentJSON("authorized", "pending_capture", "") + `]}`
		}
		return 200, paymentJSON("approved", "accredited", `"captured":true`)
	}}
	p := newFake(t, f)
	ctx := context.Background()
	calls := []struct {
		name, method, path, key string
		run                     func()
		body                    map[string]any
	}{
		{"capture", "PUT", "/v1/payments/123", "pedido-842:capturar-v1",
			func() {
				p.Capture(ctx, creds, provider.CaptureRequest{IdempotencyKey: "pedido-842:capturar-v1", IntentID: "123", Amount: 800})
			},
			map[string]any{"capture": true, "transaction_amount": 8.0}},
		{"capture full", "PUT", "/v1/payments/123", "pedido-842:capturar-v2",
			func() {
				p.Capture(ctx, creds, provider.CaptureRequest{IdempotencyKey: "pedido-842:capturar-v2", IntentID: "123"})
			},
			map[string]any{"capture": true}},
		{"cancel", "PUT", "/v1/payments/123", "pedido-842:cancelar-v1",
			func() {
				p.Cancel(ctx, creds, provider.CancelRequest{IdempotencyKey: "pedido-842:cancelar-v1", IntentID: "123"})
			},
			map[string]any{"status": "cancelled"}},
		{"refund", "POST", "/v1/payments/123/refunds", "pedido-842:estornar-v1",
			func() {
				p.Refund(ctx, creds, provider.RefundRequest{IdempotencyKey: "pedido-842:estornar-v1", IntentID: "123", Amount: 400})
			},
			map[string]any{"amount": 4.0}},
		{"refund full", "POST", "/v1/payments/123/refunds", "pedido-842:estornar-v2",
			func() {
				p.Refund(ctx, creds, provider.RefundRequest{IdempotencyKey: "pedido-842:estornar-v2", IntentID: "123"})
			}, nil},
		{"retrieve", "GET", "/v1/payments/123", "", func() { _, _ = p.RetrieveIntent(ctx, creds, "123") }, nil},
		{"search", "GET", "/v1/payments/search", "", func() { _, _ = p.SearchIntentByPaymentID(ctx, creds, "pay_1:1") }, nil},
		{"list refunds", "GET", "/v1/payments/123/refunds", "", func() { _, _ = p.ListRefunds(ctx, creds, "123") }, nil},
	}
	for _, c := range calls {
		c.run()
		s := f.last(t)
		wantPath(t, s, c.method, c.path)
		if got, ok := s.header["X-Idempotency-Key"]; c.key == "" && ok || c.key != "" && (len(got) != 1 || got[0] != c.key) {
			t.Errorf("%s: X-Idempotency-Key %q, want %q", c.name, got, c.key)
		}
		for k, v := range c.body {
			if s.body[k] != v {
				t.Errorf("%s: body %s = %v, want %v", c.name, k, s.body[k], v)
			}
		}
	}
}

// TestNothingSentWithoutWhatItNeeds: refusals before sending are certain
// failures, and no request leaves with the SDK's random key.
func TestNothingSentWithoutWhatItNeeds(t *testing.T) {
	t.Parallel()
	f := &fakeMP{}
	p := newFake(t, f)
	ctx := context.Background()
	mod := func(m func(*provider.AuthorizeRequest)) provider.AuthorizeRequest { r := cardReq(); m(&r); return r }
	cases := map[string]provider.Result{
		"no token": p.Authorize(ctx, provider.Credentials{}, cardReq()),
		"no key":   p.Authorize(ctx, creds, mod(func(r *provider.AuthorizeRequest) { r.IdempotencyKey = "" })),
		"no email": p.Authorize(ctx, creds, mod(func(r *provider.AuthorizeRequest) { r.BillingDetails = nil })),
		"stripe token": p.Authorize(ctx, creds, mod(func(r *provider.AuthorizeRequest) {
			r.MercadoPago, r.PaymentMethod = nil, "pm_card_visa"
		})),
		"usd":            p.Authorize(ctx, creds, mod(func(r *provider.AuthorizeRequest) { r.Currency = "USD" })),
		"pix manual":     p.Authorize(ctx, creds, func() provider.AuthorizeRequest { r := pixReq(); r.CaptureMethod = "manual"; return r }()),
		"boleto no id":   p.Authorize(ctx, creds, func() provider.AuthorizeRequest { r := boletoReq(); r.BillingDetails.TaxID = ""; return r }()),
		"no attempt":     p.Authorize(ctx, creds, mod(func(r *provider.AuthorizeRequest) { delete(r.Metadata, "attempt") })),
		"bad id":         p.Capture(ctx, creds, provider.CaptureRequest{IdempotencyKey: "k", IntentID: "pi_1"}),
		"capture no key": p.Capture(ctx, creds, provider.CaptureRequest{IntentID: "123"}),
	}
	for name, res := range cases {
		if res.Answer != provider.AnswerInvalid || res.FailureCode == "" {
			t.Errorf("%s: answer %q code %q, want invalid with a code", name, res.Answer, res.FailureCode)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests sent, want none", n)
	}
}

func TestRetrieveAndSearch(t *testing.T) {
	t.Parallel()
	older := paymentJSON("cancelled", "by_collector", "")
	newer := `{"id":124,"status":"authorized","status_detail":"pending_capture","transaction_amount":10.5,"currency_id":"BRL",
"external_reference":"pay_1:1","date_created":"2026-12-04T09:00:00.000-04:00","metadata":{"payment_id":"pay_1","attempt":"1"}}`
	other := `{"id":125,"status":"approved","external_reference":"pay_1:10","date_created":"2026-12-04T10:00:00.000-04:00"}`
	f := &fakeMP{answer: func(s seen) (int, string) {
		switch s.path {
		case basePath + "/v1/payments/search":
			if s.query == "" {
				return 400, `{}`
			}
			return 200, `{"paging":{"total":3},"results":[` + older + "," + newer + "," + other + `]}`
		case basePath + "/v1/payments/404":
			return 404, `{"message":"Payment not found","error":"not_found","status":404,"cause":[]}`
		}
		return 200, older
	}}
	p := newFake(t, f)
	ctx := context.Background()
	in, err := p.SearchIntentByPaymentID(ctx, creds, "pay_1:1")
	if err != nil || in.ID != "124" || in.State != provider.IntentAuthorized {
		t.Fatalf("search: %+v, %v; want the newest payment of the attempt", in, err)
	}
	if q := f.last(t).query; !containsAll(q, "external_reference=pay_1%3A1", "sort=date_created", "criteria=desc") {
		t.Fatalf("search query %q", q)
	}
	if _, err := p.SearchIntentByPaymentID(ctx, creds, "pay_1"); !errors.Is(err, ErrAttemptNeeded) || errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("bare payment id: %v, want ErrAttemptNeeded, never ErrNotFound", err)
	}
	if _, err := p.SearchIntentByAttempt(ctx, creds, "pay_1", 2); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("search of another attempt: %v, want ErrNotFound", err)
	}
	if in, err := p.RetrieveIntent(ctx, creds, "123"); err != nil || in.State != provider.IntentCanceled {
		t.Fatalf("retrieve: %+v, %v", in, err)
	}
	if _, err := p.RetrieveIntent(ctx, creds, "404"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("retrieve 404: %v, want ErrNotFound", err)
	}
	if _, err := p.RetrieveIntent(ctx, creds, "pi_123"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("retrieve of a non-numeric id: %v, want ErrNotFound", err)
	}
}

func TestListRefunds(t *testing.T) {
	t.Parallel()
	f := &fakeMP{answer: func(s seen) (int, string) {
		if s.path == basePath+"/v1/payments/404/refunds" {
			return 404, `{"message":"not found","error":"not_found","status":404}`
		}
		return 200, `[{"id":9,"payment_id":123,"amount":4.1,"status":"approved"},{"id":10,"payment_id":123,"amount":1,"status":"in_process"},
{"id":11,"payment_id":123,"amount":2,"status":"rejected"}]`
	}}
	p := newFake(t, f)
	got, err := p.ListRefunds(context.Background(), creds, "123")
	if err != nil || len(got) != 3 {
		t.Fatalf("refunds %v, %v", got, err)
	}
	want := []provider.Refund{{ID: "9", State: provider.RefundSucceeded, Amount: 410}, {ID: "10", State: provider.RefundPending, Amount: 100},
		{ID: "11", State: provider.RefundFailed, Amount: 200}}
	for i, w := range want {
		if g := got[i]; g.ID != w.ID || g.State != w.State || g.Amount != w.Amount {
			t.Errorf("refund %d = %+v, want %+v", i, g, w)
		}
	}
	if _, err := p.ListRefunds(context.Background(), creds, "404"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("refunds of an unknown payment: %v, want ErrNotFound", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func TestListDisputes(t *testing.T) {
	t.Parallel()
	f := &fakeMP{answer: func(s seen) (int, string) {
		if s.query != "payment_id=123" {
			return 200, `{"paging":{"total":0},"results":[]}`
		}
		return 200, `{"paging":{"offset":0,"limit":25,"total":3},"results":[
{"id":"234000062890459000","payments":[123],"currency":"BRL","amount":10.5,"reason":"general","coverage_applied":null,
 "documentation_required":true,"documentation_status":"not_supplied","date_documentation_deadline":"2026-12-10T12:00:00.000-04:00"},
{"id":2,"payments":[123],"amount":1,"reason":"fraud","coverage_applied":true,"documentation_status":"valid"},
{"id":3,"payments":[123],"amount":2,"reason":"fraud","coverage_applied":false,"documentation_status":"invalid"}]}`
	}}
	p := newFake(t, f)
	got, err := p.ListDisputes(context.Background(), creds, "123")
	if err != nil || len(got) != 3 {
		t.Fatalf("disputes %+v, %v", got, err)
	}
	wantPath(t, f.last(t), http.MethodGet, "/v1/chargebacks/search")
	want := []provider.Dispute{
		{ID: "234000062890459000", IntentID: "123", Amount: 1050, Reason: "general", Status: "not_supplied",
			EvidenceDueBy: time.Date(2026, 12, 10, 16, 0, 0, 0, time.UTC)},
		{ID: "2", IntentID: "123", Amount: 100, Reason: "fraud", Status: "won", Closed: true},
		{ID: "3", IntentID: "123", Amount: 200, Reason: "fraud", Status: "lost", Closed: true},
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("dispute %d = %+v, want %+v", i, got[i], w)
		}
	}
	if _, ok := f.last(t).header["X-Idempotency-Key"]; ok {
		t.Error("a GET carried an idempotency key")
	}
	if d, err := p.ListDisputes(context.Background(), creds, "124"); err != nil || len(d) != 0 {
		t.Fatalf("no chargebacks: %v, %v", d, err)
	}
}
