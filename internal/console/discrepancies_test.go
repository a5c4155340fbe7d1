package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/reconcile"
)

// capturedWithDashboardRefund makes a captured payment, refunds part of it
// in the provider's dashboard behind the service's back and runs the
// audit; it returns the payment's id and the discrepancy found.
func capturedWithDashboardRefund(t *testing.T, e *apitest.Env, order string) (string, *payment.Discrepancy) {
	t.Helper()
	r := e.Create("k-"+order, fmt.Sprintf(`{"order_id":%q,"amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`, order))
	apitest.WantStatus(t, r, http.StatusCreated)
	p := r.JSON(t)
	id, pi := p["id"].(string), p["provider_payment_id"].(string)
	if _, err := e.Sim.DashboardRefund(pi, 500); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Operations.Audit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	page, err := e.Operations.ListDiscrepancies(ctx, payment.DiscrepancyOpen, id, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].Kind != payment.KindAmountRefundedMismatch {
		t.Fatalf("the audit found %+v for %s, want one amount_refunded_mismatch", page.Data, id)
	}
	return id, page.Data[0]
}

func resolvedAudits(t *testing.T, e *apitest.Env, paymentID string) []payment.AuditEntry {
	t.Helper()
	v, err := e.Operations.AdminGet(context.Background(), paymentID)
	if err != nil {
		t.Fatal(err)
	}
	var out []payment.AuditEntry
	for _, a := range v.Audit {
		if a.Action == "discrepancy.resolved" {
			out = append(out, a)
		}
	}
	return out
}

func TestDiscrepancyPages(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	id, dsc := capturedWithDashboardRefund(t, e, "pedido-painel")
	resolvePath := "/console/discrepancies/" + dsc.ID + "/resolve"

	t.Run("WithoutASessionEveryPageAndActionRedirectsToSignIn", func(t *testing.T) {
		c := newClient(t, e)
		for _, p := range []struct{ method, path string }{
			{"GET", "/console/discrepancies"}, {"GET", "/console/discrepancies?status=resolved"},
			{"GET", resolvePath}, {"POST", resolvePath},
		} {
			var form url.Values
			if p.method == "POST" {
				form = url.Values{"reason": {"x"}, "action": {"note"}, "idempotency_key": {"k"}}
			}
			res, _ := c.do(p.method, p.path, form)
			wantRedirect(t, res, "/console/sign-in?next=")
		}
	})

	c := newClient(t, e)
	c.signIn("Ana", apitest.AdminToken)

	t.Run("TheOverviewAndTheListShowTheOpenDiscrepancy", func(t *testing.T) {
		_, page := c.do(http.MethodGet, "/console/", nil)
		if !regexp.MustCompile(`data-kind="amount_refunded_mismatch"><td>amount_refunded_mismatch</td><td class="num"><span class="badge attention">1<`).MatchString(page) ||
			!strings.Contains(page, `id="open-total"><a href="/console/discrepancies?status=open">1<`) {
			t.Fatalf("overview does not count one open amount_refunded_mismatch:\n%s", page)
		}
		res, page := c.do(http.MethodGet, "/console/discrepancies", nil)
		if res.StatusCode != http.StatusOK || !strings.Contains(page, `data-discrepancy-id="`+dsc.ID+`" data-status="open"`) ||
			!strings.Contains(page, `href="`+resolvePath+`"`) {
			t.Fatalf("discrepancies = %d, want the open one with a resolve link:\n%s", res.StatusCode, page)
		}
		_, page = c.do(http.MethodGet, "/console/discrepancies?status=resolved", nil)
		if strings.Contains(page, dsc.ID) {
			t.Fatal("the resolved filter shows an open discrepancy")
		}
		_, page = c.do(http.MethodGet, "/console/payments/"+id, nil)
		if !strings.Contains(page, `data-discrepancy-id="`+dsc.ID+`"`) {
			t.Fatalf("the payment's page does not show its discrepancy:\n%s", page)
		}
	})

	t.Run("AFormWithoutItsCSRFTokenIsRefused", func(t *testing.T) {
		_, page := c.do(http.MethodGet, resolvePath, nil)
		form := url.Values{"reason": {"seen"}, "action": {"note"}, "idempotency_key": {field(t, keyField, page)}}
		res, _ := c.do(http.MethodPost, resolvePath, form)
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("resolve without csrf_token = %d, want 403", res.StatusCode)
		}
		form.Set("csrf_token", "wrong")
		if res, _ := c.do(http.MethodPost, resolvePath, form); res.StatusCode != http.StatusForbidden {
			t.Fatalf("resolve with a wrong csrf_token = %d, want 403", res.StatusCode)
		}
		if n := len(resolvedAudits(t, e, id)); n != 0 {
			t.Fatalf("%d resolutions after refused forms, want 0", n)
		}
	})

	t.Run("AResolveNeedsAReasonAndAnAction", func(t *testing.T) {
		_, page := c.do(http.MethodGet, resolvePath, nil)
		base := url.Values{"csrf_token": {field(t, csrfField, page)}, "idempotency_key": {field(t, keyField, page)}}
		for _, f := range []url.Values{{"reason": {"  "}, "action": {"note"}}, {"reason": {"seen"}}, {"reason": {"seen"}, "action": {"delete"}}} {
			for k, v := range base {
				f[k] = v
			}
			res, page := c.do(http.MethodPost, resolvePath, f)
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(page, `id="error"`) {
				t.Fatalf("resolve with %v = %d, want 400 with the form again", f, res.StatusCode)
			}
		}
		got, err := e.Operations.GetDiscrepancy(context.Background(), dsc.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != payment.DiscrepancyOpen {
			t.Fatalf("discrepancy %s after refused forms, want open", got.Status)
		}
	})

	t.Run("ADoubleSubmittedResolveActsOnce", func(t *testing.T) {
		_, page := c.do(http.MethodGet, resolvePath, nil)
		form := url.Values{"reason": {"customer refunded by phone"}, "action": {"note"},
			"csrf_token": {field(t, csrfField, page)}, "idempotency_key": {field(t, keyField, page)}}
		for range 2 {
			res, _ := c.do(http.MethodPost, resolvePath, form)
			wantRedirect(t, res, "/console/payments/"+id+"?done=resolve")
		}
		audits := resolvedAudits(t, e, id)
		if len(audits) != 1 || audits[0].Actor != "Ana" || audits[0].Reason != "customer refunded by phone" {
			t.Fatalf("resolutions %+v, want one by Ana with the reason", audits)
		}
		got, err := e.Operations.GetDiscrepancy(context.Background(), dsc.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != payment.DiscrepancyResolved {
			t.Fatalf("discrepancy %s, want resolved", got.Status)
		}
		_, page = c.do(http.MethodGet, "/console/payments/"+id+"?done=resolve", nil)
		if !strings.Contains(page, `data-discrepancy-id="`+dsc.ID+`" data-status="resolved"`) || !strings.Contains(page, "discrepancy.resolved") {
			t.Fatalf("the payment's page does not show the resolved discrepancy and its audit entry:\n%s", page)
		}
		_, page = c.do(http.MethodGet, "/console/discrepancies?status=resolved", nil)
		if !strings.Contains(page, `data-discrepancy-id="`+dsc.ID+`" data-status="resolved"`) {
			t.Fatalf("the resolved filter does not show it:\n%s", page)
		}
		// A fresh form on a resolved discrepancy says so and changes nothing.
		_, page = c.do(http.MethodGet, resolvePath, nil)
		form.Set("idempotency_key", field(t, keyField, page))
		if res, _ := c.do(http.MethodPost, resolvePath, form); res.StatusCode != http.StatusConflict {
			t.Fatalf("resolving again with a new key = %d, want 409", res.StatusCode)
		}
		if n := len(resolvedAudits(t, e, id)); n != 1 {
			t.Fatalf("%d resolutions, want 1", n)
		}
		if !strings.Contains(e.Logs.String(), `"discrepancy_id":"`+dsc.ID+`"`) {
			t.Fatal("no log line names the discrepancy")
		}
	})
}

// The list pages 25 at a time, the next page continuing where the first
// ended.
func TestDiscrepancyListPages(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	for i := range 26 {
		r := e.Create(fmt.Sprintf("k-pg-%d", i), fmt.Sprintf(`{"order_id":"pg-%d","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`, i))
		apitest.WantStatus(t, r, http.StatusCreated)
		if _, err := e.Sim.DashboardRefund(r.JSON(t)["provider_payment_id"].(string), 100); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Operations.Audit(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, e)
	c.signIn("Ana", apitest.AdminToken)
	row := regexp.MustCompile(`data-discrepancy-id="(dsc_[^"]+)"`)
	_, page := c.do(http.MethodGet, "/console/discrepancies", nil)
	first := row.FindAllStringSubmatch(page, -1)
	next := regexp.MustCompile(`href="([^"]+)" id="next-page"`).FindStringSubmatch(page)
	if len(first) != 25 || next == nil {
		t.Fatalf("first page has %d rows and next link %v, want 25 and a link", len(first), next)
	}
	_, page = c.do(http.MethodGet, strings.ReplaceAll(next[1], "&amp;", "&"), nil)
	second := row.FindAllStringSubmatch(page, -1)
	if len(second) != 1 || second[0][1] == first[24][1] || strings.Contains(page, `id="next-page"`) {
		t.Fatalf("second page rows %v, want the 26th alone and no next link", second)
	}
}

// disputedPayment makes a captured payment on an account whose provider
// webhooks reach the service, opens a dispute of 15.00 at the provider
// and waits until its webhook has been delivered.
func disputedPayment(t *testing.T, e *apitest.Env, order string) string {
	t.Helper()
	ctx := context.Background()
	stripeKey, secret := "sk_test_dp_"+apitest.SecretSuffix(t), "whsec_"+apitest.SecretSuffix(t)
	a, apiKey, err := e.Accounts.Create(ctx, "Loja Contestada", stripeKey, secret)
	if err != nil {
		t.Fatal(err)
	}
	e.Sim.RegisterWebhookEndpoint(stripeKey, e.URL+"/webhooks/stripe/"+a.ID, secret)
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-" + order, Bearer: apiKey,
		Body: fmt.Sprintf(`{"order_id":%q,"amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`, order)})
	apitest.WantStatus(t, r, http.StatusCreated)
	p := r.JSON(t)
	if _, err := e.Sim.OpenDispute(p["provider_payment_id"].(string), 1500, "product_not_received"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, apitest.WaitTimeout)
	defer cancel()
	if err := e.Sim.WaitWebhooks(wctx); err != nil {
		t.Fatalf("webhooks not delivered: %v", err)
	}
	return p["id"].(string)
}

// A refund whose outcome is unknown leaves the discrepancy open and held,
// and the pages say so until the reconciler settles the refund.
func TestDiscrepancyRefundInDoubt(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	id, dsc := capturedWithDashboardRefund(t, e, "pedido-duvida")
	resolvePath := "/console/discrepancies/" + dsc.ID + "/resolve"
	c := newClient(t, e)
	c.signIn("Ana", apitest.AdminToken)
	fault := e.Sim.Inject(providersim.Fault{Op: "refund", Kind: providersim.Error500BeforeEffect})

	_, page := c.do(http.MethodGet, resolvePath, nil)
	form := url.Values{"reason": {"customer asked"}, "action": {"refund"},
		"csrf_token": {field(t, csrfField, page)}, "idempotency_key": {field(t, keyField, page)}}
	res, _ := c.do(http.MethodPost, resolvePath, form)
	wantRedirect(t, res, "/console/payments/"+id+"?done=resolve-pending")
	_, page = c.do(http.MethodGet, "/console/payments/"+id+"?done=resolve-pending", nil)
	if !strings.Contains(page, "answer is not known yet") || !strings.Contains(page, `data-discrepancy-id="`+dsc.ID+`" data-status="open"`) ||
		!strings.Contains(page, `data-resolution="unknown"`) || strings.Contains(page, `id="resolve-`+dsc.ID+`"`) {
		t.Fatalf("the payment's page does not show the refund in doubt:\n%s", page)
	}

	fault.Remove()
	r, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(), Accounts: e.Accounts, After: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, page = c.do(http.MethodGet, "/console/discrepancies?status=resolved", nil)
	if !strings.Contains(page, `data-discrepancy-id="`+dsc.ID+`" data-status="resolved"`) || !strings.Contains(page, `data-resolution="succeeded"`) {
		t.Fatalf("the settled refund did not resolve it:\n%s", page)
	}
	if got := e.Sim.Stats().Refunds; got != 1 {
		t.Errorf("refunds at the provider = %d, want 1", got)
	}
}
