package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
)

// An account's page shows its routing (its providers in order while none
// is set) and changes it from the JSON form, with a CSRF token and a
// reason; a routing the account cannot use is refused naming the field,
// and nothing changes.
func TestAccountPageRouting(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	ctx := context.Background()
	a, _, err := e.Accounts.CreateWith(ctx, "Loja Rota",
		account.Secrets{StripeSecret: "sk_test_console_routing", MercadoPagoToken: "TEST-console-routing-1"})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, e)
	c.signIn("Ana", apitest.AdminToken)

	_, list := c.do(http.MethodGet, "/console/accounts", nil)
	if !strings.Contains(list, `<a href="/console/accounts/`+a.ID+`">`) {
		t.Fatalf("the accounts page does not link the account:\n%s", list)
	}
	res, page := c.do(http.MethodGet, "/console/accounts/"+a.ID, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `<tr><td colspan="6">No rules.</td></tr>`) ||
		!strings.Contains(page, `<span id="routing-default" class="providers">stripe, mercadopago</span>`) {
		t.Fatalf("account page without a routing: %d\n%s", res.StatusCode, page)
	}
	if strings.Contains(page, "sk_test_console_routing") || strings.Contains(page, "TEST-console-routing-1") {
		t.Fatal("the account page shows a secret")
	}
	token := field(t, csrfField, page)
	routing := `{"rules":[{"match":{"payment_method":"pix","currency":"brl","max_amount":50000},"providers":["mercadopago"]}],"default":["stripe"]}`

	res, _ = c.do(http.MethodPost, "/console/accounts/"+a.ID+"/routing", url.Values{"routing": {routing}, "reason": {"Pix at Mercado Pago"}})
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a form without its CSRF token: %d, want 403", res.StatusCode)
	}
	res, page = c.do(http.MethodPost, "/console/accounts/"+a.ID+"/routing", url.Values{"csrf_token": {token}, "routing": {routing}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(page, "Give a reason") {
		t.Fatalf("a change without a reason: %d", res.StatusCode)
	}
	res, page = c.do(http.MethodPost, "/console/accounts/"+a.ID+"/routing", url.Values{"csrf_token": {token},
		"routing": {`{"rules":[{"match":{"currency":"BRLX"},"providers":["paypal"]}],"default":["stripe"]}`}, "reason": {"typo"}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(page, "<code>rules.0.match.currency</code>") ||
		!strings.Contains(page, "<code>rules.0.providers.0</code>") || !strings.Contains(page, "BRLX") {
		t.Fatalf("an invalid routing: %d, want 400 naming the fields and keeping the text\n%s", res.StatusCode, page)
	}
	if rt, _ := e.Accounts.Routing(ctx, a.ID); len(rt.Rules) != 0 {
		t.Fatalf("a refused routing was stored: %+v", rt)
	}

	res, _ = c.do(http.MethodPost, "/console/accounts/"+a.ID+"/routing", url.Values{"csrf_token": {token},
		"routing": {routing}, "reason": {"Pix at Mercado Pago"}})
	wantRedirect(t, res, "/console/accounts/"+a.ID+"?done=routing")
	_, page = c.do(http.MethodGet, "/console/accounts/"+a.ID+"?done=routing", nil)
	for _, want := range []string{`id="saved"`, `<tr data-rule="0"><td>0</td><td>pix</td><td>BRL</td>`, `<td class="num">50000</td>`,
		`<td class="providers">mercadopago</td>`, `<span id="routing-default" class="providers">stripe</span>`} {
		if !strings.Contains(page, want) {
			t.Fatalf("account page after the change lacks %s:\n%s", want, page)
		}
	}
	m, err := e.Accounts.Merchant(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Route(payment.CreateRequest{PaymentMethod: "pix", Currency: "BRL", Amount: 2000}); !slices.Equal(got, []string{"mercadopago"}) {
		t.Fatalf("a Pix routes to %v after the console's change", got)
	}
	if !loggedAction(e.Logs.String(), "account.routing", "Ana", "Pix at Mercado Pago") {
		t.Fatalf("the change is not logged with its actor and reason:\n%s", e.Logs.String())
	}

	res, _ = c.do(http.MethodGet, "/console/accounts/acct_missing", nil)
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown account: %d", res.StatusCode)
	}
}

func loggedAction(logs, action, actor, reason string) bool {
	for _, line := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "console action" && m["action"] == action &&
			m["actor"] == actor && m["reason"] == reason {
			return true
		}
	}
	return false
}
