package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
)

const (
	mpTokenOne  = "TEST-1111111111111111-010203-abcdef-111111111"
	mpTokenTwo  = "TEST-2222222222222222-010203-abcdef-222222222"
	mpWebhookOK = "mpsecret0123456789abcdef"
)

func adminPost(e *apitest.Env, body string) *apitest.Response {
	return e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts", Bearer: apitest.AdminToken, Body: body})
}

func adminPutProvider(e *apitest.Env, id, provider, body string) *apitest.Response {
	return e.Do(apitest.Request{Method: http.MethodPut, Path: "/admin/v1/accounts/" + id + "/providers/" + provider,
		Bearer: apitest.AdminToken, Body: body})
}

// noSecrets fails when a response echoes any of the secrets.
func noSecrets(t *testing.T, r *apitest.Response, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(string(r.Body), s) {
			t.Fatalf("response echoes a secret: %s", r.Body)
		}
	}
}

// An account is created with Mercado Pago's credentials alone, or with
// both providers' (Stripe first), never with none; the payment service
// sees both providers in the order they were added.
func TestAdminAccountsMercadoPagoCreate(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	ctx := context.Background()

	mp := adminPost(e, `{"name":"Loja MP","mercadopago_access_token":"`+mpTokenOne+`","mercadopago_webhook_secret":"`+mpWebhookOK+`"}`)
	wantStatus(t, mp, http.StatusCreated)
	noSecrets(t, mp, mpTokenOne, mpWebhookOK)
	m, err := e.Accounts.Merchant(ctx, mp.JSON(t)["id"].(string))
	if err != nil || !slices.Equal(m.Providers, []string{"mercadopago"}) || m.Credentials.SecretKey != "" {
		t.Fatalf("Mercado Pago alone: %+v, %v", m.Providers, err)
	}
	if c, ok := m.CredentialsFor(payment.ProviderMercadoPago); !ok || c.SecretKey != mpTokenOne {
		t.Fatal("the merchant lacks its Mercado Pago access token")
	}

	both := adminPost(e, `{"name":"Loja Dupla","stripe_secret_key":"sk_test_mp_both","webhook_secret":"whsec_both",`+
		`"mercadopago_access_token":"`+mpTokenTwo+`"}`)
	wantStatus(t, both, http.StatusCreated)
	noSecrets(t, both, "sk_test_mp_both", "whsec_both", mpTokenTwo)
	m, err = e.Accounts.Merchant(ctx, both.JSON(t)["id"].(string))
	if err != nil || !slices.Equal(m.Providers, []string{"stripe", "mercadopago"}) {
		t.Fatalf("both: %+v, %v", m.Providers, err)
	}
	if c, _ := m.CredentialsFor(payment.ProviderStripe); c.SecretKey != "sk_test_mp_both" || m.Credentials.SecretKey != "sk_test_mp_both" {
		t.Fatal("the merchant lacks its Stripe secret")
	}
	if c, _ := m.CredentialsFor(payment.ProviderMercadoPago); c.SecretKey != mpTokenTwo {
		t.Fatal("the merchant lacks its Mercado Pago access token")
	}

	wantProblem(t, adminPost(e, `{"name":"Loja Nenhuma"}`), http.StatusBadRequest, "invalid_request")
	wantProblem(t, adminPost(e, `{"name":"Loja Segredo","mercadopago_webhook_secret":"`+mpWebhookOK+`"}`), http.StatusBadRequest, "invalid_request")
	bad := adminPost(e, `{"name":"Loja Espaco","mercadopago_access_token":"`+mpTokenOne+` "}`)
	wantProblem(t, bad, http.StatusBadRequest, "invalid_request")
	noSecrets(t, bad, mpTokenOne)
	wantProblem(t, adminPost(e, `{"name":"Copia","mercadopago_access_token":"`+mpTokenOne+`"}`), http.StatusConflict, "provider_credentials_in_use")

	// The start-up pass that asks Stripe about old accounts leaves an
	// account without a Stripe secret alone.
	if sum, err := e.Accounts.RecordProviderAccounts(ctx, e.Logger()); err != nil || sum != (account.OwnersSummary{}) {
		t.Fatalf("provider accounts pass: %+v, %v; want nothing examined", sum, err)
	}
}

// PUT /admin/v1/accounts/{id}/providers/{provider} adds or replaces one
// provider's credentials and answers with the account, secrets never
// echoed.
func TestAdminAccountsPutProvider(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	created := adminPost(e, `{"name":"Loja Cresce","stripe_secret_key":"sk_test_grows"}`)
	wantStatus(t, created, http.StatusCreated)
	id := created.JSON(t)["id"].(string)

	put := adminPutProvider(e, id, "mercadopago", `{"mercadopago_access_token":"`+mpTokenOne+`","mercadopago_webhook_secret":"`+mpWebhookOK+`"}`)
	wantStatus(t, put, http.StatusOK)
	noSecrets(t, put, mpTokenOne, mpWebhookOK, "sk_test_grows")
	body := put.JSON(t)
	if body["id"] != id || !slices.Equal(anyStrings(body["providers"]), []string{"stripe", "mercadopago"}) {
		t.Fatalf("after adding mercadopago: %s", put.Body)
	}
	// Stripe's webhook secret is not set; Mercado Pago's is.
	if body["has_webhook_secret"] != true {
		t.Fatalf("has_webhook_secret with Mercado Pago's webhook secret set: %s", put.Body)
	}
	m, err := e.Accounts.Merchant(context.Background(), id)
	if err != nil || !slices.Equal(m.Providers, []string{"stripe", "mercadopago"}) {
		t.Fatalf("merchant after adding mercadopago: %+v, %v", m.Providers, err)
	}
	if c, _ := m.CredentialsFor(payment.ProviderMercadoPago); c.SecretKey != mpTokenOne {
		t.Fatal("the merchant lacks its new Mercado Pago access token")
	}

	// Replacing Stripe's keeps the order.
	rep := adminPutProvider(e, id, "stripe", `{"stripe_secret_key":"sk_test_grows_two","webhook_secret":"whsec_grows","actor":"ops","reason":"rotated"}`)
	wantStatus(t, rep, http.StatusOK)
	noSecrets(t, rep, "sk_test_grows_two", "whsec_grows")
	if !slices.Equal(anyStrings(rep.JSON(t)["providers"]), []string{"stripe", "mercadopago"}) {
		t.Fatalf("after replacing stripe: %s", rep.Body)
	}

	wantProblem(t, adminPutProvider(e, "acct_missing", "mercadopago", `{"mercadopago_access_token":"`+mpTokenTwo+`"}`), http.StatusNotFound, "not_found")
	wantProblem(t, adminPutProvider(e, id, "paypal", `{"mercadopago_access_token":"`+mpTokenTwo+`"}`), http.StatusBadRequest, "invalid_request")
	wantProblem(t, adminPutProvider(e, id, "mercadopago", `{}`), http.StatusBadRequest, "invalid_request")
	wantProblem(t, adminPutProvider(e, id, "stripe", `{"webhook_secret":"whsec_only"}`), http.StatusBadRequest, "invalid_request")
	wantProblem(t, adminPutProvider(e, id, "stripe", `{"mercadopago_access_token":"`+mpTokenTwo+`"}`), http.StatusBadRequest, "invalid_request")

	other := adminPost(e, `{"name":"Loja Outra","mercadopago_access_token":"`+mpTokenTwo+`"}`)
	wantStatus(t, other, http.StatusCreated)
	taken := adminPutProvider(e, id, "mercadopago", `{"mercadopago_access_token":"`+mpTokenTwo+`"}`)
	wantProblem(t, taken, http.StatusConflict, "provider_credentials_in_use")
	noSecrets(t, taken, mpTokenTwo)
	wantProblem(t, adminPutProvider(e, other.JSON(t)["id"].(string), "stripe", `{"stripe_secret_key":"sk_test_grows_two"}`),
		http.StatusConflict, "provider_credentials_in_use")
}

func anyStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
