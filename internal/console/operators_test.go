package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/console"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
)

// newOperator creates a named operator and returns its token.
func newOperator(t *testing.T, e *apitest.Env, name string) string {
	t.Helper()
	_, token, err := console.CreateOperator(context.Background(), postgres.NewConsoleStore(e.DB), name, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// auditBy reports whether the payment's audit has action by actor.
func auditBy(t *testing.T, e *apitest.Env, id, action, actor string) bool {
	t.Helper()
	v, err := e.Operations.AdminGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range v.Audit {
		if a.Action == action && a.Actor == actor {
			return true
		}
	}
	return false
}

// TestNamedOperators: an operator signs in with a token of its own, no
// typed name, and every action it takes is audited under its name; nobody
// signs in with the shared token under an operator's name; a disabled
// operator's token opens nothing and its sessions end.
func TestNamedOperators(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	id := createPayment(t, e, "pedido-op", "pm_card_visa", http.StatusCreated)
	token := newOperator(t, e, "Carla Souza")
	store := postgres.NewConsoleStore(e.DB)
	if _, _, err := console.CreateOperator(context.Background(), store, "carla SOUZA", time.Now()); err != console.ErrOperatorNameTaken {
		t.Fatalf("a second operator of the same name (other case): %v, want ErrOperatorNameTaken", err)
	}
	if strings.Contains(e.Logs.String(), token) {
		t.Fatal("the operator's token reached the log")
	}

	c := newClient(t, e)
	res, _ := c.signIn("", token)
	wantRedirect(t, res, "/console/")
	_, page := c.do(http.MethodGet, "/console/", nil)
	if !strings.Contains(page, `id="actor">Carla Souza<`) {
		t.Fatalf("signed in with the operator's token, the page does not name Carla:\n%s", page)
	}
	// A typed name does not change who the token is.
	other := newClient(t, e)
	other.signIn("Somebody Else", token)
	if _, page := other.do(http.MethodGet, "/console/", nil); !strings.Contains(page, `id="actor">Carla Souza<`) {
		t.Fatal("a typed name overrode the operator's token")
	}

	_, page = c.do(http.MethodGet, "/console/payments/"+id+"/reconcile", nil)
	res, _ = c.do(http.MethodPost, "/console/payments/"+id+"/reconcile", url.Values{"reason": {"checking"}, "csrf_token": {field(t, csrfField, page)}})
	wantRedirect(t, res, "/console/payments/"+id)
	if !auditBy(t, e, id, "payment.reconciled", "Carla Souza") && !strings.Contains(e.Logs.String(), `"actor":"Carla Souza"`) {
		t.Fatal("the operator's action is not recorded under its name")
	}

	// The shared admin token may not sign in under an operator's name.
	impostor := newClient(t, e)
	if res, _ := impostor.signIn("CARLA souza", apitest.AdminToken); res.StatusCode != http.StatusForbidden {
		t.Fatalf("admin token under an operator's name = %d, want 403", res.StatusCode)
	}
	// A made-up operator token is a failed sign-in.
	if res, _ := newClient(t, e).signIn("", "op_"+strings.Repeat("x", 43)); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unknown operator token = %d, want 401", res.StatusCode)
	}

	ok, err := store.ConsoleOperatorDisable(context.Background(), "carla souza", time.Now())
	if err != nil || !ok {
		t.Fatalf("disable: %v %v", ok, err)
	}
	if signedIn(t, c) {
		t.Fatal("the disabled operator's session still opens the console")
	}
	if res, _ := newClient(t, e).signIn("", token); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a disabled operator's token = %d, want 401", res.StatusCode)
	}
	ops, err := store.ConsoleOperatorList(context.Background())
	if err != nil || len(ops) != 1 || ops[0].DisabledAt == nil {
		t.Fatalf("operators = %+v %v, want Carla, disabled", ops, err)
	}
}

// TestCaptureAndRefundFromTheConsole: an operator captures and refunds
// with a reason, a confirmation and the form's key; a double submit moves
// money once; both are audited under the operator's name.
func TestCaptureAndRefundFromTheConsole(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	id := createPayment(t, e, "pedido-cap", "pm_card_visa", http.StatusCreated)
	c := newClient(t, e)
	c.signIn("", newOperator(t, e, "Dario"))

	_, page := c.do(http.MethodGet, "/console/payments/"+id, nil)
	if !strings.Contains(page, `id="action-capture"`) || strings.Contains(page, `id="action-refund"`) {
		t.Fatalf("an authorized payment's page should offer capture, not refund:\n%s", page)
	}
	submit := func(action string, form url.Values, times int) {
		t.Helper()
		_, page := c.do(http.MethodGet, "/console/payments/"+id+"/"+action, nil)
		form.Set("csrf_token", field(t, csrfField, page))
		form.Set("idempotency_key", field(t, keyField, page))
		for range times {
			res, body := c.do(http.MethodPost, "/console/payments/"+id+"/"+action, form)
			if res.StatusCode != http.StatusSeeOther {
				t.Fatalf("%s = %d:\n%s", action, res.StatusCode, body)
			}
		}
	}
	// A bad amount is refused before anything is sent.
	_, page = c.do(http.MethodGet, "/console/payments/"+id+"/capture", nil)
	if !strings.Contains(page, `name="amount" value="2500"`) {
		t.Fatalf("the capture form does not offer the authorized amount:\n%s", page)
	}
	res, _ := c.do(http.MethodPost, "/console/payments/"+id+"/capture", url.Values{"reason": {"shipped"}, "amount": {"-5"},
		"csrf_token": {field(t, csrfField, page)}, "idempotency_key": {field(t, keyField, page)}})
	if res.StatusCode != http.StatusBadRequest || e.Sim.Stats().Captures != 0 {
		t.Fatalf("capture of -5 = %d with %d captures, want 400 and none", res.StatusCode, e.Sim.Stats().Captures)
	}

	submit("capture", url.Values{"reason": {"order shipped"}, "amount": {"2500"}}, 2)
	submit("refund", url.Values{"reason": {"one item returned"}, "amount": {"1000"}}, 2)
	st := e.Sim.Stats()
	if st.Captures != 1 || st.Refunds != 1 {
		t.Fatalf("the provider saw %d captures and %d refunds, want 1 and 1 (double submits replay)", st.Captures, st.Refunds)
	}
	v, err := e.Operations.AdminGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Payment.Status != payment.StatusCaptured || v.Payment.AmountCaptured != 2500 || v.Payment.AmountRefunded != 1000 {
		t.Fatalf("payment %s captured %d refunded %d, want captured 2500 and refunded 1000",
			v.Payment.Status, v.Payment.AmountCaptured, v.Payment.AmountRefunded)
	}
	var capBy, refBy bool
	for _, a := range v.Audit {
		capBy = capBy || (strings.HasPrefix(a.Action, string(payment.OpCapture)) && a.Actor == "Dario" && a.Reason == "order shipped")
		refBy = refBy || (strings.HasPrefix(a.Action, string(payment.OpRefund)) && a.Actor == "Dario" && a.Reason == "one item returned")
	}
	if !capBy || !refBy {
		t.Fatalf("audit %+v lacks the capture or the refund by Dario with its reason", v.Audit)
	}
	_, page = c.do(http.MethodGet, "/console/payments/"+id, nil)
	if !strings.Contains(page, `id="action-refund"`) {
		t.Fatal("a partly refunded payment should still offer a refund")
	}
}
