package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// countRows reports how many payments and key records the test database
// holds.
func countRows(t *testing.T, e *apitest.Env) (payments, keys int) {
	t.Helper()
	ctx := context.Background()
	if err := e.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&payments); err != nil {
		t.Fatal(err)
	}
	if err := e.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	return payments, keys
}

func TestCreateRejectsBadInput(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	good := createBody("pedido-bad", 2000)
	big := `{"order_id":"pedido-bad","amount":2000,"currency":"BRL","payment_method":"pm_card_visa","description":"` + strings.Repeat("x", 70<<10) + `"}`
	var manyMeta strings.Builder
	manyMeta.WriteString(`{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa","metadata":{`)
	for i := range 21 {
		if i > 0 {
			manyMeta.WriteString(",")
		}
		manyMeta.WriteString(`"k` + strings.Repeat("x", i) + `":"v"`)
	}
	manyMeta.WriteString("}}")

	cases := []struct {
		name    string
		req     apitest.Request
		status  int
		code    string
		noField bool
	}{
		{"no key", apitest.Request{Body: good}, 400, "idempotency_key_missing", false},
		{"empty key", apitest.Request{Body: good, Headers: map[string]string{"Idempotency-Key": ""}}, 400, "idempotency_key_missing", false},
		{"key too long", apitest.Request{Key: strings.Repeat("k", 256), Body: good}, 400, "idempotency_key_invalid", false},
		{"key with space", apitest.Request{Key: "a b", Body: good}, 400, "idempotency_key_invalid", false},
		{"key not ascii", apitest.Request{Key: "chave-ç", Body: good}, 400, "idempotency_key_invalid", false},
		{"no auth", apitest.Request{Key: "k-bad", Body: good, Bearer: "-"}, 401, "unauthorized", false},
		{"wrong api key", apitest.Request{Key: "k-bad", Body: good, Bearer: "psk_wrong"}, 401, "unauthorized", false},
		{"not json media type", apitest.Request{Key: "k-bad", Body: good, Headers: map[string]string{"Content-Type": "text/plain"}}, 415, "unsupported_media_type", false},
		{"too large", apitest.Request{Key: "k-bad", Body: big}, 413, "request_too_large", false},
		{"not json", apitest.Request{Key: "k-bad", Body: `{"order_id":`}, 400, "invalid_request", false},
		{"two objects", apitest.Request{Key: "k-bad", Body: good + good}, 400, "invalid_request", false},
		{"unknown field", apitest.Request{Key: "k-bad", Body: `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa","card_number":"4242"}`}, 400, "invalid_request", false},
		{"missing fields", apitest.Request{Key: "k-bad", Body: `{}`}, 400, "invalid_request", true},
		{"bad order id", apitest.Request{Key: "k-bad", Body: createBody("pedido 842", 2000)}, 400, "invalid_request", true},
		{"long order id", apitest.Request{Key: "k-bad", Body: createBody(strings.Repeat("o", 65), 2000)}, 400, "invalid_request", true},
		{"zero amount", apitest.Request{Key: "k-bad", Body: createBody("o", 0)}, 400, "invalid_request", true},
		{"amount too big", apitest.Request{Key: "k-bad", Body: createBody("o", 100000000)}, 400, "invalid_request", true},
		{"fractional amount", apitest.Request{Key: "k-bad", Body: `{"order_id":"o","amount":20.5,"currency":"BRL","payment_method":"pm_card_visa"}`}, 400, "invalid_request", true},
		{"amount as string", apitest.Request{Key: "k-bad", Body: `{"order_id":"o","amount":"2000","currency":"BRL","payment_method":"pm_card_visa"}`}, 400, "invalid_request", true},
		{"bad currency", apitest.Request{Key: "k-bad", Body: `{"order_id":"o","amount":1,"currency":"REAL","payment_method":"pm_card_visa"}`}, 400, "invalid_request", true},
		{"card number", apitest.Request{Key: "k-bad", Body: `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"4242424242424242"}`}, 400, "invalid_request", true},
		{"bad payment method", apitest.Request{Key: "k-bad", Body: `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm-card"}`}, 400, "invalid_request", true},
		{"bad capture method", apitest.Request{Key: "k-bad", Body: `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa","capture_method":"later"}`}, 400, "invalid_request", true},
		{"too many metadata keys", apitest.Request{Key: "k-bad", Body: manyMeta.String()}, 400, "invalid_request", true},
		{"long metadata key", apitest.Request{Key: "k-bad", Body: `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa","metadata":{"` + strings.Repeat("k", 41) + `":"v"}}`}, 400, "invalid_request", true},
		{"long metadata value", apitest.Request{Key: "k-bad", Body: `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa","metadata":{"k":"` + strings.Repeat("v", 501) + `"}}`}, 400, "invalid_request", true},
		{"metadata value not a string", apitest.Request{Key: "k-bad", Body: `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa","metadata":{"k":1}}`}, 400, "invalid_request", false},
	}
	for _, c := range cases {
		c.req.Method, c.req.Path = http.MethodPost, "/v1/payments"
		r := e.Do(c.req)
		if r.Status != c.status || r.Code(t) != c.code {
			t.Errorf("%s: got %d %s, want %d %s", c.name, r.Status, r.Body, c.status, c.code)
			continue
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: Content-Type %q, want application/problem+json", c.name, ct)
		}
		p := r.JSON(t)
		if p["request_id"] == "" || p["status"] != float64(c.status) {
			t.Errorf("%s: problem lacks request_id or status: %s", c.name, r.Body)
		}
		if c.noField {
			if errs, _ := p["errors"].([]any); len(errs) == 0 {
				t.Errorf("%s: no field errors listed: %s", c.name, r.Body)
			}
		}
		if strings.Contains(string(r.Body), "4242424242424242") {
			t.Errorf("%s: the card number was echoed back", c.name)
		}
	}
	if payments, keys := countRows(t, e); payments != 0 || keys != 0 {
		t.Fatalf("rejected requests stored %d payments and %d keys, want none", payments, keys)
	}
	wantEffects(t, e.Sim, 0)
	if n := e.PaymentCalls(); n != 0 {
		t.Fatalf("rejected requests reached the provider %d times", n)
	}
	// The key used by the rejected requests is free: the fixed request runs.
	wantStatus(t, create(e, "k-bad", good), http.StatusCreated)
	wantEffects(t, e.Sim, 1)
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	_, otherKey := e.CreateAccount("Loja Dois", "sk_test_other_"+apitest.SecretSuffix(t))

	mine := create(e, "shared-key", createBody("pedido-t", 2000))
	wantStatus(t, mine, http.StatusCreated)
	theirs := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "shared-key", Bearer: otherKey,
		Body: createBody("pedido-t", 2000)})
	wantStatus(t, theirs, http.StatusCreated)
	if theirs.Header.Get("Idempotent-Replayed") != "" || theirs.JSON(t)["id"] == mine.JSON(t)["id"] {
		t.Fatalf("the same client key in another account was replayed: %s", theirs.Body)
	}
	wantEffects(t, e.Sim, 2)

	id := mine.JSON(t)["id"].(string)
	r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id, Bearer: otherKey})
	if r.Status != http.StatusNotFound || r.Code(t) != "not_found" || strings.Contains(string(r.Body), "pedido-t") {
		t.Fatalf("another account's payment: %d %s, want a bare 404", r.Status, r.Body)
	}
	list := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments?order_id=pedido-t", Bearer: otherKey})
	if data := list.JSON(t)["data"].([]any); len(data) != 1 || data[0].(map[string]any)["id"] == id {
		t.Fatalf("order list leaks across accounts: %s", list.Body)
	}
}

func TestAdminAccounts(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	body := `{"name":"Loja Tres","stripe_secret_key":"sk_test_admin_tres","webhook_secret":"whsec_abc"}`
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts", Bearer: apitest.AdminToken, Body: body})
	wantStatus(t, r, http.StatusCreated)
	key, _ := r.JSON(t)["api_key"].(string)
	if key == "" {
		t.Fatalf("no api_key: %s", r.Body)
	}
	// The new key works.
	wantStatus(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments?order_id=x", Bearer: key}), http.StatusOK)
	// Provider credentials can never be shared.
	dup := e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts", Bearer: apitest.AdminToken,
		Body: `{"name":"Copia","stripe_secret_key":"sk_test_admin_tres"}`})
	if dup.Status != http.StatusConflict || dup.Code(t) != "provider_credentials_in_use" {
		t.Fatalf("shared credentials: %d %s", dup.Status, dup.Body)
	}
	bad := e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts", Bearer: "wrong", Body: body})
	if bad.Status != http.StatusUnauthorized || bad.Code(t) != "unauthorized" {
		t.Fatalf("wrong admin token: %d %s", bad.Status, bad.Body)
	}
	var stored int
	if err := e.DB.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM accounts WHERE position('sk_test_admin_tres'::bytea in stripe_secret_enc) > 0`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Fatalf("the provider secret is stored in clear")
	}
}

// A secret differing only by white space is another spelling of the same
// Stripe account: it must be refused, never stored beside the clean one.
func TestAdminAccountsRefuseMalformedSecrets(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	post := func(body string) *apitest.Response {
		return e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts", Bearer: apitest.AdminToken, Body: body})
	}
	wantStatus(t, post(`{"name":"Loja","stripe_secret_key":"sk_test_spaced_one"}`), http.StatusCreated)
	for _, c := range []struct{ body, field string }{
		{`{"name":"Copia","stripe_secret_key":"sk_test_spaced_one "}`, "stripe_secret_key"},
		{`{"name":"Copia","stripe_secret_key":"sk_test_spaced_one\n"}`, "stripe_secret_key"},
		{`{"name":"Copia","stripe_secret_key":" sk_test_spaced_one"}`, "stripe_secret_key"},
		{`{"name":"Copia","stripe_secret_key":"sk_test_spaced one"}`, "stripe_secret_key"},
		{`{"name":"Copia","stripe_secret_key":"pk_test_spaced_one"}`, "stripe_secret_key"},
		{`{"name":"Copia","stripe_secret_key":"sk_test_spaced_two","webhook_secret":"whsec_abcd\r\n"}`, "webhook_secret"},
	} {
		r := post(c.body)
		if r.Status != http.StatusBadRequest || r.Code(t) != "invalid_request" {
			t.Errorf("%s: %d %s, want 400 invalid_request", c.body, r.Status, r.Body)
			continue
		}
		errs, _ := r.JSON(t)["errors"].([]any)
		if len(errs) != 1 || errs[0].(map[string]any)["field"] != c.field {
			t.Errorf("%s: errors %v, want one naming %s", c.body, errs, c.field)
		}
		if strings.Contains(string(r.Body), "spaced") {
			t.Errorf("%s: the answer echoes the secret: %s", c.body, r.Body)
		}
	}
	var n int
	if err := e.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM accounts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 { // the harness's account and the clean one
		t.Fatalf("%d accounts stored, want 2", n)
	}
}
