package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// TestSearch finds a payment by its id, its order id and its provider id,
// and says so when nothing matches.
func TestSearch(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	id := createPayment(t, e, "pedido-busca", "pm_card_visa", http.StatusCreated)
	var p struct {
		ProviderPaymentID string `json:"provider_payment_id"`
	}
	r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id})
	if err := json.Unmarshal(r.Body, &p); err != nil || p.ProviderPaymentID == "" {
		t.Fatalf("payment %s: %s", id, r.Body)
	}
	// A capture sent with the merchant's own request id.
	r = e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/capture", Key: "k-busca-cap", Body: `{}`,
		Headers: map[string]string{"X-Request-Id": "req-merchant-busca-1"}})
	if r.Status != http.StatusOK {
		t.Fatalf("capture = %d %s", r.Status, r.Body)
	}
	c := newClient(t, e)
	c.signIn("Ana", apitest.AdminToken)

	res, page := c.do(http.MethodGet, "/console/search?q=req-merchant-busca-1", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `data-payment-id="`+id+`"`) || !strings.Contains(page, "by request id") {
		t.Fatalf("search by request id = %d, want the payment the capture acted on:\n%s", res.StatusCode, page)
	}
	res, _ = c.do(http.MethodGet, "/console/search?q="+id, nil)
	wantRedirect(t, res, "/console/payments/"+id)
	for _, q := range []string{"pedido-busca", p.ProviderPaymentID} {
		res, page := c.do(http.MethodGet, "/console/search?q="+url.QueryEscape(q), nil)
		if res.StatusCode != http.StatusOK || !strings.Contains(page, `data-payment-id="`+id+`"`) {
			t.Fatalf("search %q = %d, want a row for %s:\n%s", q, res.StatusCode, id, page)
		}
	}
	res, page = c.do(http.MethodGet, "/console/search?q=pedido-que-nao-existe", nil)
	if res.StatusCode != http.StatusOK || strings.Contains(page, "data-payment-id") || !strings.Contains(page, "Nothing matches") {
		t.Fatalf("search for nothing = %d:\n%s", res.StatusCode, page)
	}
	if res, _ := c.do(http.MethodGet, "/console/search?q="+url.QueryEscape("a\x00b"), nil); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a search PostgreSQL cannot store = %d, want 400", res.StatusCode)
	}
}

// TestOverviewCharts: the overview draws each provider's last day (payments
// per hour, authorization and decline rates, the share unknown) as SVG in
// the page, which the console's CSP allows.
func TestOverviewCharts(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	createPayment(t, e, "pedido-ok", "pm_card_visa", http.StatusCreated)
	e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-declined",
		Body: `{"order_id":"pedido-recusado","amount":2500,"currency":"BRL","payment_method":"pm_card_chargeDeclined"}`})
	c := newClient(t, e)
	c.signIn("Ana", apitest.AdminToken)
	res, page := c.do(http.MethodGet, "/console/", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("overview = %d", res.StatusCode)
	}
	for _, want := range []string{`data-provider="stripe"`, "stripe: 2 payments", `<span class="rate-auth">50.0%</span>`,
		`<span class="rate-decline">50.0%</span>`, `<span class="rate-unknown">0.0%</span>`, `<svg `, `<circle `, `<rect `} {
		if !strings.Contains(page, want) {
			t.Fatalf("overview lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, " style=") {
		t.Fatal("the charts need a script or inline style, which the CSP refuses")
	}
}

// TestNextCheckOnlyWhileUnresolved: a Pix attempt is polled on a schedule
// while it waits; once paid it keeps the time in its row, and the console
// shows no next check for it.
func TestNextCheckOnlyWhileUnresolved(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-pix-check",
		Body: `{"order_id":"pedido-pix-check","amount":2500,"currency":"BRL","payment_method":"pix"}`})
	var p struct{ ID, ProviderPaymentID string }
	var raw map[string]any
	if err := json.Unmarshal(r.Body, &raw); err != nil || r.Status != http.StatusCreated {
		t.Fatalf("pix create = %d %s", r.Status, r.Body)
	}
	p.ID, p.ProviderPaymentID = raw["id"].(string), raw["provider_payment_id"].(string)
	c := newClient(t, e)
	c.signIn("Ana", apitest.AdminToken)
	_, page := c.do(http.MethodGet, "/console/payments/"+p.ID, nil)
	if strings.Contains(page, `<td class="next-check">—</td>`) {
		t.Fatalf("a waiting Pix attempt shows no next check:\n%s", page)
	}
	if _, err := e.Sim.Pay(p.ProviderPaymentID); err != nil {
		t.Fatal(err)
	}
	_, page = c.do(http.MethodGet, "/console/payments/"+p.ID+"/reconcile", nil)
	res, _ := c.do(http.MethodPost, "/console/payments/"+p.ID+"/reconcile", url.Values{"reason": {"checking"}, "csrf_token": {field(t, csrfField, page)}})
	wantRedirect(t, res, "/console/payments/"+p.ID)
	var stale int
	if err := e.DB.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM attempts WHERE payment_id = $1 AND status = 'succeeded' AND next_reconcile_at IS NOT NULL`, p.ID).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if stale != 1 {
		t.Fatalf("%d paid attempts still holding their polling time, want 1 (the case this test is about)", stale)
	}
	_, page = c.do(http.MethodGet, "/console/payments/"+p.ID, nil)
	if !strings.Contains(page, `<td class="next-check">—</td>`) {
		t.Fatalf("a resolved attempt still shows a next check:\n%s", page)
	}
}
