package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
)

// The accounts page shows each account's providers in the order added,
// never their secrets.
func TestAccountsPageShowsProviders(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	const token, secret = "TEST-console-providers-1", "consolempsecret1"
	a, _, err := e.Accounts.CreateWith(context.Background(), "Loja Dupla",
		account.Secrets{StripeSecret: "sk_test_console_both", MercadoPagoToken: token, MercadoPagoWebhookSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, e)
	c.signIn("Ana", apitest.AdminToken)
	res, page := c.do(http.MethodGet, "/console/accounts", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("accounts page: %d", res.StatusCode)
	}
	if !strings.Contains(page, `<td class="mono"><a href="/console/accounts/`+a.ID+`">`+a.ID+`</a></td><td>Loja Dupla</td><td class="providers">stripe, mercadopago</td>`) {
		t.Fatalf("the page does not show the account's providers:\n%s", page)
	}
	for _, s := range []string{token, secret, "sk_test_console_both"} {
		if strings.Contains(page, s) {
			t.Fatalf("the page shows a secret")
		}
	}
}
