package mercadopago

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// TestStatusMapping: every status and status_detail the service reads.
func TestStatusMapping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status, detail string
		want           provider.IntentState
		code           string
	}{
		{"approved", "accredited", provider.IntentCaptured, ""},
		{"authorized", "pending_capture", provider.IntentAuthorized, ""},
		{"pending", "pending_waiting_transfer", provider.IntentRequiresAction, ""},
		{"pending", "pending_waiting_payment", provider.IntentRequiresAction, ""},
		{"pending", "pending_challenge", provider.IntentRequiresAction, ""},
		{"pending", "", provider.IntentRequiresAction, ""},
		{"pending", "pending_contingency", provider.IntentProcessing, ""},
		{"pending", "pending_review_manual", provider.IntentProcessing, ""},
		{"in_process", "pending_contingency", provider.IntentProcessing, ""},
		{"in_process", "pending_review_manual", provider.IntentProcessing, ""},
		{"rejected", "cc_rejected_insufficient_amount", provider.IntentNeedsPaymentMethod, "cc_rejected_insufficient_amount"},
		{"rejected", "cc_rejected_bad_filled_security_code", provider.IntentNeedsPaymentMethod, "cc_rejected_bad_filled_security_code"},
		{"rejected", "cc_rejected_3ds_challenge", provider.IntentNeedsPaymentMethod, provider.FailureAuthentication},
		{"cancelled", "by_collector", provider.IntentCanceled, ""},
		{"cancelled", "expired", provider.IntentCanceled, provider.FailureExpired},
		{"refunded", "refunded", provider.IntentCaptured, ""},
		{"charged_back", "settled", provider.IntentCaptured, ""},
		{"in_mediation", "", provider.IntentCaptured, ""},
		{"something_new", "", provider.IntentOther, ""},
	}
	for _, c := range cases {
		f := &fakeMP{answer: always(200, paymentJSON(c.status, c.detail, ""))}
		in, err := newFake(t, f).RetrieveIntent(context.Background(), creds, "123")
		if err != nil {
			t.Fatal(err)
		}
		if in.State != c.want || in.FailureCode != c.code {
			t.Errorf("%s/%s: state %q code %q, want %q %q", c.status, c.detail, in.State, in.FailureCode, c.want, c.code)
		}
	}
}

// TestRejectedIsACardError: Mercado Pago answers a refused card with 201 and
// status rejected; that is a decline, stored for the key like Stripe's 402.
func TestRejectedIsACardError(t *testing.T) {
	t.Parallel()
	f := &fakeMP{answer: always(201, paymentJSON("rejected", "cc_rejected_other_reason", ""))}
	res := newFake(t, f).Authorize(context.Background(), creds, cardReq())
	if res.Answer != provider.AnswerCardError || res.FailureCode != "cc_rejected_other_reason" || res.Intent == nil ||
		res.Intent.State != provider.IntentNeedsPaymentMethod || !res.Intent.Closed {
		t.Fatalf("result %+v, want a card error with the intent, closed", res)
	}
	if got := provider.Judge(newFake(t, f).Profile(), res.Answer, provider.Send{Authorize: true}); got != provider.Declined {
		t.Fatalf("judged %q, want declined", got)
	}
}

func TestPixNextAction(t *testing.T) {
	t.Parallel()
	f := &fakeMP{answer: always(201, paymentJSON("pending", "pending_waiting_transfer", `"payment_method_id":"pix","payment_type_id":"bank_transfer",
"captured":true,"date_of_expiration":"2026-12-04T08:30:00.000-04:00",
"point_of_interaction":{"transaction_data":{"qr_code":"00020126pix","qr_code_base64":"iVBORw0KGgo=","ticket_url":"https://mp.example/pix/123"}}`))}
	res := newFake(t, f).Authorize(context.Background(), creds, pixReq())
	if res.Answer != provider.AnswerObject || res.Intent.State != provider.IntentRequiresAction {
		t.Fatalf("result %+v", res)
	}
	na := res.Intent.NextAction
	want := provider.PixQRCode{Data: "00020126pix", ImageURLPNG: "data:image/png;base64,iVBORw0KGgo=",
		HostedInstructionsURL: "https://mp.example/pix/123", ExpiresAt: "2026-12-04T12:30:00Z"}
	if na == nil || na.Type != provider.NextPixQRCode || na.PixQRCode == nil || *na.PixQRCode != want {
		t.Fatalf("next action %+v, want %+v", na, want)
	}
	if res.Intent.ClientSecret != "" {
		t.Fatalf("client secret %q on a Pix, want none (only a 3-D Secure challenge has a creq)", res.Intent.ClientSecret)
	}
	s := f.last(t)
	if s.body["payment_method_id"] != "pix" || s.body["date_of_expiration"] != "2026-12-04T12:30:00.000+00:00" || s.body["token"] != nil {
		t.Fatalf("pix body %v", s.body)
	}
}

func TestThreeDSChallengeRedirect(t *testing.T) {
	t.Parallel()
	f := &fakeMP{answer: always(201, paymentJSON("pending", "pending_challenge", `"callback_url":"https://shop.example/back",
"three_ds_info":{"external_resource_url":"https://acs.example/challenge","creq":"eyJjcmVxIjoxfQ"}`))}
	r := cardReq()
	r.ReturnURL = "https://shop.example/back"
	res := newFake(t, f).Authorize(context.Background(), creds, r)
	na := res.Intent.NextAction
	if res.Intent.State != provider.IntentRequiresAction || na == nil || na.Type != provider.NextRedirectToURL ||
		*na.RedirectToURL != (provider.RedirectToURL{URL: "https://acs.example/challenge", ReturnURL: "https://shop.example/back"}) {
		t.Fatalf("intent %+v next action %+v", res.Intent, na)
	}
	// The frontend posts the creq to the url: it rides in client_secret,
	// never in the url itself.
	if res.Intent.ClientSecret != "eyJjcmVxIjoxfQ" {
		t.Fatalf("client secret %q, want the creq", res.Intent.ClientSecret)
	}
	if s := f.last(t); s.body["three_d_secure_mode"] != "optional" || s.body["callback_url"] != "https://shop.example/back" {
		t.Fatalf("body %v", s.body)
	}
}

func TestBoletoPayerAndNextAction(t *testing.T) {
	t.Parallel()
	f := &fakeMP{answer: always(201, paymentJSON("pending", "pending_waiting_payment", `"payment_method_id":"bolbradesco","payment_type_id":"ticket",
"date_of_expiration":"2026-12-09T22:59:59.000-04:00",
"transaction_details":{"external_resource_url":"https://mp.example/boleto/123","digitable_line":"23793.38128 60000.000003","barcode":{"content":"2379"}}`))}
	res := newFake(t, f).Authorize(context.Background(), creds, boletoReq())
	na := res.Intent.NextAction
	want := provider.BoletoDetails{Number: "23793.38128 60000.000003", HostedVoucherURL: "https://mp.example/boleto/123",
		PDF: "https://mp.example/boleto/123", ExpiresAt: "2026-12-10T02:59:59Z"}
	if na == nil || na.Type != provider.NextBoletoDetails || *na.BoletoDetails != want {
		t.Fatalf("next action %+v, want %+v", na, want)
	}
	s := f.last(t)
	payer, _ := s.body["payer"].(map[string]any)
	id, _ := payer["identification"].(map[string]any)
	addr, _ := payer["address"].(map[string]any)
	if s.body["payment_method_id"] != "bolbradesco" || s.body["date_of_expiration"] != "2026-12-09T12:00:00.000+00:00" ||
		payer["email"] != "ana@example.com" || payer["first_name"] != "Ana" || payer["last_name"] != "Maria Souza" ||
		id["type"] != "CPF" || id["number"] != "52998224725" {
		t.Fatalf("boleto body %v", s.body)
	}
	wantAddr := map[string]any{"zip_code": "01310100", "street_name": "Av. Paulista", "street_number": "1000", "city": "São Paulo", "federal_unit": "SP"}
	for k, v := range wantAddr {
		if addr[k] != v {
			t.Errorf("address %s = %v, want %v", k, addr[k], v)
		}
	}
}

// TestClassification: what each kind of answer is (CONTRACT §5).
func TestClassification(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status int
		body   string
		want   provider.Answer
		code   string
	}{
		{400, `{"message":"Invalid card_token_id","error":"bad_request","status":400,"cause":[{"code":3003,"description":"Invalid card_token_id"}]}`,
			provider.AnswerInvalid, "3003"},
		{400, `{"message":"invalid","error":"bad_request","status":400,"cause":[]}`, provider.AnswerInvalid, "bad_request"},
		{400, `not json`, provider.AnswerInvalid, "invalid_request"},
		{401, `{"message":"invalid access token","error":"unauthorized","status":401}`, provider.AnswerCredentials, codeAuthentication},
		{403, `{"message":"forbidden","error":"forbidden","status":403}`, provider.AnswerCredentials, codeAuthentication},
		{404, `{"message":"Payment not found","error":"not_found","status":404}`, provider.AnswerInvalid, "not_found"},
		{409, `{"message":"conflict","error":"conflict","status":409}`, provider.AnswerIndeterminate, ""},
		{429, `{"message":"too many requests","status":429}`, provider.AnswerIndeterminate, ""},
		{500, `{"message":"internal error","status":500}`, provider.AnswerIndeterminate, ""},
		{502, `<html>bad gateway</html>`, provider.AnswerIndeterminate, ""},
		{201, `not json`, provider.AnswerIndeterminate, ""},
		{201, ``, provider.AnswerIndeterminate, ""},
	}
	for _, c := range cases {
		f := &fakeMP{answer: always(c.status, c.body)}
		res := newFake(t, f).Capture(context.Background(), creds, provider.CaptureRequest{IdempotencyKey: "k-v1", IntentID: "123"})
		if res.Answer != c.want || res.FailureCode != c.code {
			t.Errorf("%d %s: answer %q code %q, want %q %q", c.status, c.body, res.Answer, res.FailureCode, c.want, c.code)
		}
		if n := len(f.requests()); n != 1 || res.Resent {
			t.Errorf("%d: %d requests (resent %v), want one: sdk-go's own retries are off", c.status, n, res.Resent)
		}
		if c.want == provider.AnswerIndeterminate && res.Err == nil {
			t.Errorf("%d: no error to log", c.status)
		}
	}
}

func TestTimeoutAndLostConnectionAreIndeterminate(t *testing.T) {
	t.Parallel()
	hang := &fakeMP{hang: true}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if res := newFake(t, hang).Authorize(ctx, creds, cardReq()); res.Answer != provider.AnswerIndeterminate {
		t.Fatalf("timeout: %+v, want indeterminate", res)
	}
	// A fresh connection closed after the request was written: not
	// re-sent by net/http, and nobody knows whether it took effect.
	lost := &fakeMP{hangup: func(seen) bool { return true }}
	res := newFake(t, lost).Authorize(context.Background(), creds, cardReq())
	if res.Answer != provider.AnswerIndeterminate || res.Err == nil {
		t.Fatalf("lost connection: %+v, want indeterminate", res)
	}
}

// hangupFirstPost is a fake that breaks the connection of its first POST
// after reading it, without an answer.
func hangupFirstPost() *fakeMP {
	var posts atomic.Int32
	return &fakeMP{
		answer: always(201, paymentJSON("authorized", "pending_capture", "")),
		hangup: func(s seen) bool {
			if s.method != http.MethodPost {
				return false
			}
			return posts.Add(1) == 1
		},
	}
}

// TestBrokenKeepAliveResendIsCounted: net/http silently re-sends a POST
// carrying X-Idempotency-Key when a reused keep-alive connection breaks
// before the answer, if Mercado Pago keeps keys. The answer is then that of
// a re-send (CONTRACT §5).
func TestBrokenKeepAliveResendIsCounted(t *testing.T) {
	t.Parallel()
	f := hangupFirstPost()
	p := newFakeWith(t, f, Config{KeyRetention: time.Hour})
	ctx := context.Background()
	// A GET leaves an idle keep-alive connection for the POST to reuse.
	if _, err := p.RetrieveIntent(ctx, creds, "123"); err != nil {
		t.Fatal(err)
	}
	res := p.Authorize(ctx, creds, cardReq())
	if res.Answer != provider.AnswerObject || !res.Resent {
		t.Fatalf("answer %q resent %v, want the object of a re-sent call", res.Answer, res.Resent)
	}
	var keys []string
	for _, s := range f.requests() {
		if s.method == http.MethodPost {
			keys = append(keys, s.header.Get("X-Idempotency-Key"))
			if s.body["capture"] != false {
				t.Errorf("re-sent body lost capture:false: %v", s.body)
			}
		}
	}
	if len(keys) != 2 || keys[0] != key || keys[1] != key {
		t.Fatalf("POST keys %q, want the derived key twice", keys)
	}
	if p.Retries() != 0 {
		t.Fatalf("Retries() = %d, want 0", p.Retries())
	}
	// A call sent once is not a re-send.
	if res := p.Authorize(ctx, creds, cardReq()); res.Answer != provider.AnswerObject || res.Resent {
		t.Fatalf("second call: answer %q resent %v, want sent once", res.Answer, res.Resent)
	}
}

// TestBrokenKeepAliveNotResentWithoutRetention: without a key retention a
// re-sent key is a new request that may charge again, so the broken
// request is not re-sent: its outcome is in doubt, for a lookup.
func TestBrokenKeepAliveNotResentWithoutRetention(t *testing.T) {
	t.Parallel()
	f := hangupFirstPost()
	p := newFake(t, f)
	ctx := context.Background()
	if _, err := p.RetrieveIntent(ctx, creds, "123"); err != nil {
		t.Fatal(err)
	}
	res := p.Authorize(ctx, creds, cardReq())
	posts := 0
	for _, s := range f.requests() {
		if s.method == http.MethodPost {
			posts++
		}
	}
	if res.Answer != provider.AnswerIndeterminate || res.Resent || posts != 1 {
		t.Fatalf("answer %q resent %v after %d POSTs, want one POST in doubt", res.Answer, res.Resent, posts)
	}
}

func TestProfileFromConfig(t *testing.T) {
	t.Parallel()
	def, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p := def.Profile(); p.Name != provider.MercadoPagoProfile(0, provider.DefaultSearchLag).Name ||
		p.KeyRetention != 0 || p.SearchLag != provider.DefaultSearchLag {
		t.Fatalf("default profile = %+v, want Mercado Pago's with no retention and the default search lag", p)
	}
	set, err := New(Config{KeyRetention: time.Hour, SearchLag: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if p := set.Profile(); p.KeyRetention != time.Hour || p.SearchLag != time.Minute {
		t.Fatalf("profile = %+v, want retention 1h and search lag 1m", p)
	}
}

// TestExpiryIsTheStoredAttempts: every send of one stored attempt carries
// the date_of_expiration fixed when the attempt was built, however far the
// clock moved between sends (Mercado Pago answers a key reused with another
// body 409). An attempt stored before the expiry was recorded counts its
// ExpiresIn from the time of sending.
func TestExpiryIsTheStoredAttempts(t *testing.T) {
	t.Parallel()
	f := &fakeMP{answer: always(201, paymentJSON("pending", "pending_waiting_transfer", `"payment_method_id":"pix"`))}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	var mu sync.Mutex
	now := fixedNow
	p, err := New(Config{APIBase: srv.URL + basePath, KeyRetention: time.Hour, Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}})
	if err != nil {
		t.Fatal(err)
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	// send decodes the attempt's stored request, as every send does.
	send := func(stored []byte) any {
		t.Helper()
		var r provider.AuthorizeRequest
		if err := json.Unmarshal(stored, &r); err != nil {
			t.Fatal(err)
		}
		if res := p.Authorize(context.Background(), creds, r); res.Answer != provider.AnswerObject {
			t.Fatalf("result %+v", res)
		}
		return f.last(t).body["date_of_expiration"]
	}
	pix, boleto := pixReq(), boletoReq()
	pix.ExpiresAt = fixedNow.Add(30 * time.Minute)
	boleto.ExpiresAt = fixedNow.AddDate(0, 0, 5).In(time.FixedZone("BRT", -3*3600))
	for _, c := range []struct {
		req  provider.AuthorizeRequest
		want string
	}{
		{pix, "2026-12-04T12:30:00.000+00:00"},
		{boleto, "2026-12-09T12:00:00.000+00:00"},
	} {
		stored, err := json.Marshal(c.req)
		if err != nil {
			t.Fatal(err)
		}
		first := send(stored)
		advance(7 * time.Minute)
		if again := send(stored); first != c.want || again != c.want {
			t.Fatalf("%s: date_of_expiration %v then %v, want %s both times", c.req.PaymentMethod, first, again, c.want)
		}
	}
	// A request stored without ExpiresAt (ExpiresIn 1800 s).
	old := []byte(`{"IdempotencyKey":"pedido-842:autorizar-v1","Amount":1050,"Currency":"BRL","PaymentMethod":"pix",` +
		`"CaptureMethod":"automatic","Metadata":{"payment_id":"pay_1","order_id":"pedido-842","attempt":"1"},` +
		`"ExpiresIn":1800,"BillingDetails":{"email":"ana@example.com"}}`)
	if got, want := send(old), now.Add(30*time.Minute).UTC().Format(expiryLayout); got != want {
		t.Fatalf("old request: date_of_expiration %v, want %s (from the time of sending)", got, want)
	}
}
