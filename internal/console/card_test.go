package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// TestConsoleRefusesCardNumbers types a card number, in the forms
// CONTRACT §16 lists, into every console field that is stored or logged:
// the sign-in's actor, an action's reason and a new account's name. Each
// is refused with 400, nothing is stored, the provider is not called and
// the number is neither shown back nor logged.
func TestConsoleRefusesCardNumbers(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	id := createPayment(t, e, "pedido-card", "pm_card_visa", http.StatusCreated)
	before := e.Sim.Stats().Requests
	auditsBefore := countAudit(t, e, id)
	forms := []string{"4111_1111_1111_1111", "4111.1111.1111.1111", "4111/1111/1111/1111",
		"4111\u00a01111\u00a01111\u00a01111", "４１１１１１１１１１１１１１１１", "٤١١١١١١١١١١١١١١١"}
	for _, card := range forms {
		c := newClient(t, e)
		res, page := c.signIn("Ana "+card, apitest.AdminToken)
		if res.StatusCode != http.StatusBadRequest || strings.Contains(page, card) {
			t.Fatalf("sign-in as %q = %d, want 400 without the number shown back", card, res.StatusCode)
		}
		for _, ck := range res.Cookies() {
			if ck.Name == "console_session" && ck.MaxAge >= 0 {
				t.Fatalf("sign-in as %q set a session cookie", card)
			}
		}
		c.signIn("Ana", apitest.AdminToken)
		for _, action := range []string{"reconcile", "cancel"} {
			_, page = c.do(http.MethodGet, "/console/payments/"+id+"/"+action, nil)
			res, page = c.do(http.MethodPost, "/console/payments/"+id+"/"+action, url.Values{"reason": {"customer card " + card},
				"csrf_token": {field(t, csrfField, page)}, "idempotency_key": {field(t, keyField, page)}})
			if res.StatusCode != http.StatusBadRequest || strings.Contains(page, card) {
				t.Fatalf("%s with reason %q = %d, want 400 without the number shown back", action, card, res.StatusCode)
			}
		}
		_, page = c.do(http.MethodGet, "/console/accounts", nil)
		res, _ = c.do(http.MethodPost, "/console/accounts", url.Values{"name": {card}, "reason": {"new shop"},
			"stripe_secret_key": {"sk_test_" + apitest.SecretSuffix(t) + "x"}, "csrf_token": {field(t, csrfField, page)}})
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("account named %q = %d, want 400", card, res.StatusCode)
		}
	}
	var accounts int
	if err := e.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM accounts`).Scan(&accounts); err != nil {
		t.Fatal(err)
	}
	if audits := countAudit(t, e, id) - auditsBefore; audits != 0 || accounts != 1 {
		t.Fatalf("stored %d audit entries and %d accounts, want 0 and 1", audits, accounts)
	}
	if n := e.Sim.Stats().Requests - before; n != 0 {
		t.Fatalf("the provider received %d requests, want 0", n)
	}
	for _, card := range forms {
		if strings.Contains(e.Logs.String(), card) {
			t.Fatalf("the log holds %q", card)
		}
	}
}

func countAudit(t *testing.T, e *apitest.Env, paymentID string) int {
	t.Helper()
	var n int
	if err := e.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE payment_id = $1`, paymentID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
