package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
)

func adminRouting(e *apitest.Env, method, id, body string) *apitest.Response {
	return e.Do(apitest.Request{Method: method, Path: "/admin/v1/accounts/" + id + "/routing", Bearer: apitest.AdminToken, Body: body})
}

// loggedRouting returns the log entries of routing changes to an account.
func loggedRouting(t *testing.T, e *apitest.Env, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(e.Logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "account routing set" && m["account_id"] == id {
			out = append(out, m)
		}
	}
	return out
}

// Without a routing, GET answers what the account uses: its providers in
// the order added. PUT stores a routing, answers it as stored (currency
// upper case), logs who set it and why, and the payment service routes by
// it.
func TestAdminAccountRoutingPutGet(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	created := adminPost(e, `{"name":"Loja Rota","stripe_secret_key":"sk_test_routing","mercadopago_access_token":"`+mpTokenOne+`"}`)
	wantStatus(t, created, http.StatusCreated)
	id, apiKey := created.JSON(t)["id"].(string), created.JSON(t)["api_key"].(string)
	// An authenticated key is cached; setting a routing drops it here.
	if a, err := e.Accounts.Authenticate(context.Background(), apiKey); err != nil || a.Routing != nil {
		t.Fatalf("before any routing: %+v, %v", a.Routing, err)
	}

	get := adminRouting(e, http.MethodGet, id, "")
	wantStatus(t, get, http.StatusOK)
	if got := string(get.Body); !strings.Contains(got, `"rules":[]`) || !strings.Contains(got, `"default":["stripe","mercadopago"]`) {
		t.Fatalf("routing of an account without one: %s", got)
	}

	put := adminRouting(e, http.MethodPut, id, `{"rules":[{"match":{"payment_method":"pix","currency":"brl","min_amount":100,"max_amount":50000},`+
		`"providers":["mercadopago","stripe"]}],"default":["stripe"],"actor":"ops@acme","reason":"Pix at Mercado Pago first"}`)
	wantStatus(t, put, http.StatusOK)
	want := `{"rules":[{"match":{"payment_method":"pix","currency":"BRL","min_amount":100,"max_amount":50000},"providers":["mercadopago","stripe"]}],"default":["stripe"]}`
	if got := strings.TrimSpace(string(put.Body)); got != want {
		t.Fatalf("PUT answered %s, want %s", got, want)
	}
	get = adminRouting(e, http.MethodGet, id, "")
	wantStatus(t, get, http.StatusOK)
	if got := strings.TrimSpace(string(get.Body)); got != want {
		t.Fatalf("GET answered %s, want %s", got, want)
	}

	logged := loggedRouting(t, e, id)
	if len(logged) != 1 || logged[0]["actor"] != "ops@acme" || logged[0]["reason"] != "Pix at Mercado Pago first" {
		t.Fatalf("routing change logged as %v, want one entry with its actor and reason", logged)
	}

	m, err := e.Accounts.Merchant(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	pix := payment.CreateRequest{PaymentMethod: "pix", Currency: "BRL", Amount: 2000}
	if got := m.Route(pix); !slices.Equal(got, []string{"mercadopago", "stripe"}) {
		t.Fatalf("a Pix routes to %v, want mercadopago then stripe", got)
	}
	if a, err := e.Accounts.Authenticate(context.Background(), apiKey); err != nil || !slices.Equal(a.Merchant().Route(pix), []string{"mercadopago", "stripe"}) {
		t.Fatalf("the authenticated account after the change: %+v, %v", a.Routing, err)
	}
	card := payment.CreateRequest{PaymentMethod: "pm_card_visa", Currency: "BRL", Amount: 2000}
	if got := m.Route(card); !slices.Equal(got, []string{"stripe"}) {
		t.Fatalf("a card routes to %v, want the default", got)
	}

	// A second PUT replaces the whole routing.
	wantStatus(t, adminRouting(e, http.MethodPut, id, `{"default":["mercadopago"]}`), http.StatusOK)
	get = adminRouting(e, http.MethodGet, id, "")
	if got := strings.TrimSpace(string(get.Body)); got != `{"rules":[],"default":["mercadopago"]}` {
		t.Fatalf("after replacing: %s", got)
	}
}

// An unknown account is 404; a routing the account cannot use is 400
// naming the field, and nothing changes.
func TestAdminAccountRoutingRefused(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	created := adminPost(e, `{"name":"Loja Stripe","stripe_secret_key":"sk_test_routing_refused"}`)
	wantStatus(t, created, http.StatusCreated)
	id := created.JSON(t)["id"].(string)

	wantProblem(t, adminRouting(e, http.MethodGet, "acct_missing", ""), http.StatusNotFound, "not_found")
	wantProblem(t, adminRouting(e, http.MethodPut, "acct_missing", `{"default":["stripe"]}`), http.StatusNotFound, "not_found")

	for body, field := range map[string]string{
		`{"default":["mercadopago"]}`: "default.0",
		`{"rules":[{"match":{"payment_method":"ach"},"providers":["stripe"]}],"default":["stripe"]}`:            "rules.0.match.payment_method",
		`{"rules":[{"match":{"currency":"BRLX"},"providers":["stripe"]}],"default":["stripe"]}`:                 "rules.0.match.currency",
		`{"rules":[{"match":{"min_amount":900,"max_amount":100},"providers":["stripe"]}],"default":["stripe"]}`: "rules.0.match.max_amount",
		`{"rules":[{"match":{},"providers":["stripe","stripe"]}],"default":["stripe"]}`:                         "rules.0.providers.1",
		`{"rules":[{"match":{},"providers":[]}],"default":["stripe"]}`:                                          "rules.0.providers",
		`{"rules":[]}`: "default",
	} {
		r := adminRouting(e, http.MethodPut, id, body)
		wantProblem(t, r, http.StatusBadRequest, "invalid_request")
		if !strings.Contains(string(r.Body), `"field":"`+field+`"`) {
			t.Errorf("%s: %s, want a field error on %s", body, r.Body, field)
		}
	}
	wantProblem(t, adminRouting(e, http.MethodPut, id, `{"default":["stripe"],"weights":[1]}`), http.StatusBadRequest, "invalid_request")
	wantProblem(t, adminRouting(e, http.MethodPut, id, `{"default":["stripe"],"actor":"`+strings.Repeat("a", 101)+`"}`), http.StatusBadRequest, "invalid_request")

	get := adminRouting(e, http.MethodGet, id, "")
	if got := strings.TrimSpace(string(get.Body)); got != `{"rules":[],"default":["stripe"]}` {
		t.Fatalf("after refused changes: %s", got)
	}
	if logged := loggedRouting(t, e, id); len(logged) != 0 {
		t.Fatalf("refused changes were logged as set: %v", logged)
	}
	r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/accounts/" + id + "/routing"})
	if r.Status != http.StatusUnauthorized && r.Status != http.StatusNotFound {
		t.Fatalf("without the admin token: %d", r.Status)
	}
}
