package payment

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/provider"
)

func TestCanTransition(t *testing.T) {
	t.Parallel()
	allowed := map[[2]Status]bool{
		{StatusProcessing, StatusAuthorized}: true, {StatusProcessing, StatusUnknown}: true,
		{StatusProcessing, StatusCaptured}: true, {StatusProcessing, StatusDeclined}: true,
		{StatusProcessing, StatusFailed}: true, {StatusProcessing, StatusCanceled}: true,
		{StatusUnknown, StatusAuthorized}: true, {StatusUnknown, StatusCaptured}: true,
		{StatusUnknown, StatusDeclined}: true, {StatusUnknown, StatusFailed}: true,
		{StatusUnknown, StatusCanceled}: true,
		// Payments that wait for the customer (CONTRACT §12). An unknown
		// create, once learned, may be waiting too.
		{StatusProcessing, StatusRequiresAction}: true, {StatusProcessing, StatusPending}: true,
		{StatusUnknown, StatusRequiresAction}: true, {StatusUnknown, StatusPending}: true,
		{StatusRequiresAction, StatusPending}: true, {StatusRequiresAction, StatusAuthorized}: true,
		{StatusRequiresAction, StatusCaptured}: true, {StatusRequiresAction, StatusDeclined}: true,
		{StatusRequiresAction, StatusCanceled}: true,
		{StatusPending, StatusAuthorized}:      true, {StatusPending, StatusCaptured}: true,
		{StatusPending, StatusFailed}: true, {StatusPending, StatusCanceled}: true,
		{StatusAuthorized, StatusCaptured}: true, {StatusAuthorized, StatusCanceled}: true,
		// An ops replay after proof of no effect.
		{StatusDeclined, StatusProcessing}: true, {StatusFailed, StatusProcessing}: true,
	}
	all := []Status{StatusProcessing, StatusUnknown, StatusRequiresAction, StatusPending, StatusAuthorized, StatusCaptured, StatusDeclined, StatusFailed, StatusCanceled}
	for _, from := range all {
		for _, to := range all {
			if got := CanTransition(from, to); got != allowed[[2]Status{from, to}] {
				t.Errorf("CanTransition(%s, %s) = %v", from, to, got)
			}
		}
	}
}

func TestStatusFinalAndLive(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s           Status
		final, live bool
	}{
		{StatusProcessing, false, true}, {StatusUnknown, false, true},
		{StatusRequiresAction, false, true}, {StatusPending, false, true},
		{StatusAuthorized, true, true}, {StatusCaptured, true, true},
		{StatusDeclined, true, false}, {StatusFailed, true, false}, {StatusCanceled, true, false},
	} {
		if c.s.Final() != c.final || c.s.Live() != c.live {
			t.Errorf("%s: Final %v Live %v, want %v %v", c.s, c.s.Final(), c.s.Live(), c.final, c.live)
		}
	}
}

func TestProviderKey(t *testing.T) {
	t.Parallel()
	if got := ProviderKey("pedido-842", OpAuthorize, 1); got != "pedido-842:autorizar-v1" {
		t.Fatalf("ProviderKey = %q", got)
	}
}

func fingerprint(t testing.TB, body string) ([]byte, error) {
	r, err := ParseCreateRequest([]byte(body))
	if err != nil {
		return nil, err
	}
	fp, err := idempotency.Fingerprint(idempotency.OpPaymentsCreate, r)
	if err != nil {
		t.Fatalf("fingerprint: %v", err)
	}
	return fp, nil
}

// FuzzParseCreateRequest: decoding never panics, and a parsed request,
// re-encoded and parsed again, is the same intent.
func FuzzParseCreateRequest(f *testing.F) {
	for _, s := range []string{
		`{"order_id":"pedido-842","amount":2000,"currency":"BRL","payment_method":"pm_card_visa","capture_method":"manual","customer_id":"cus_1","description":"x","metadata":{"k":"v"}}`,
		`{"order_id":"o","amount":2e3,"currency":"brl","payment_method":"pm_card_visa"}`,
		`{"order_id":"o","amount":"1","currency":"BRL","payment_method":"4242424242424242"}`,
		`{"order_id":"o","amount":1,"currency":"BRL","payment_methods":{"stripe":"pm_card_visa","mercadopago":{"token":"tok_APRO","payment_method_id":"visa"}}}`,
		`{"amount":-1}`, `[]`, `null`, `{"metadata":{"a":null}}`, `{"order_id":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseCreateRequest(body)
		if err != nil {
			if ErrorCode(err) != CodeInvalidRequest {
				t.Fatalf("error code %s, want invalid_request", ErrorCode(err))
			}
			return
		}
		if ContainsCardNumber(r.PaymentMethod) {
			t.Fatalf("a card number was accepted")
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := fingerprint(t, string(body))
		b, err := fingerprint(t, string(again))
		if err != nil {
			t.Fatalf("the normalized request %s does not parse: %v", again, err)
		}
		if string(a) != string(b) {
			t.Fatalf("normalizing changed the fingerprint")
		}
	})
}

// FuzzFingerprint: equal intents hash equal whatever their encoding;
// changing any value changes the hash.
func FuzzFingerprint(f *testing.F) {
	f.Add("pedido-842", int64(2000), "BRL", "pm_card_visa", true, "k", "v")
	f.Add("o", int64(1), "usd", "pm_x", false, "", "")
	f.Fuzz(func(t *testing.T, order string, amount int64, currency, pm string, manual bool, mk, mv string) {
		capture := "automatic"
		if manual {
			capture = "manual"
		}
		md := map[string]string{}
		if mk != "" {
			md[mk] = mv
		}
		canonical := map[string]any{"order_id": order, "amount": amount, "currency": currency,
			"payment_method": pm, "capture_method": capture, "metadata": md}
		body, _ := json.Marshal(canonical)
		base, err := fingerprint(t, string(body))
		if err != nil {
			return // not a valid request; decoding is fuzzed elsewhere
		}
		// Other encodings of the same intent.
		variants := []string{
			`{"metadata":` + mustJSON(md) + `,"capture_method":"` + capture + `","payment_method":` + mustJSON(pm) +
				`,"currency":` + mustJSON(strings.ToLower(currency)) + `,"amount":` + mustJSON(amount) + `,"order_id":` + mustJSON(order) + `}`,
			" \n" + string(body) + "\t",
		}
		if capture == "automatic" && len(md) == 0 {
			variants = append(variants, `{"order_id":`+mustJSON(order)+`,"amount":`+mustJSON(amount)+`,"currency":`+mustJSON(currency)+`,"payment_method":`+mustJSON(pm)+`}`)
		}
		for _, v := range variants {
			got, err := fingerprint(t, v)
			if err != nil || string(got) != string(base) {
				t.Fatalf("equivalent encoding %s hashed differently (err %v)", v, err)
			}
		}
		// A changed value is another intent.
		changed := map[string]any{}
		for k, v := range canonical {
			changed[k] = v
		}
		changed["amount"] = amount%MaxAmount + 1
		if changed["amount"] == amount {
			changed["amount"] = amount%(MaxAmount-1) + 2
		}
		other, err := fingerprint(t, mustJSON(changed))
		if err == nil && string(other) == string(base) {
			t.Fatalf("a different amount hashed the same")
		}
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestResendMargin(t *testing.T) {
	t.Parallel()
	// Defaults: PROVIDER_TIMEOUT 10s, stripe-go's 2 retries: 6 sends of
	// 10 s, two 5 s backoffs and a minute of clock skew.
	if got := resendMargin(10*time.Second, 2); got != 2*time.Minute+10*time.Second {
		t.Fatalf("margin = %v, want 2m10s", got)
	}
	if got := resendMargin(3*time.Second, 0); got != 66*time.Second {
		t.Fatalf("margin without retries = %v, want 66s", got)
	}
}

func TestAccountCredentialsFor(t *testing.T) {
	t.Parallel()
	legacy := Account{ID: "acct_1", Credentials: provider.Credentials{SecretKey: "sk_1"}}
	if c, ok := legacy.CredentialsFor(ProviderStripe); !ok || c.SecretKey != "sk_1" {
		t.Fatalf("Stripe of an account with Stripe alone = %+v %v", c, ok)
	}
	if _, ok := legacy.CredentialsFor(ProviderMercadoPago); ok {
		t.Fatal("an account without Mercado Pago credentials has some")
	}
	both := Account{ID: "acct_2", Providers: []string{ProviderMercadoPago, ProviderStripe},
		ProviderCredentials: map[string]provider.Credentials{ProviderMercadoPago: {SecretKey: "TEST-1"}, ProviderStripe: {SecretKey: "sk_2"}}}
	if c, ok := both.CredentialsFor(ProviderMercadoPago); !ok || c.SecretKey != "TEST-1" {
		t.Fatalf("Mercado Pago = %+v %v", c, ok)
	}
}
