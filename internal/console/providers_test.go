package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

const failoverBody = `{"order_id":"pedido-failover","amount":2500,"currency":"BRL",` +
	`"payment_methods":{"stripe":"pm_card_visa","mercadopago":{"token":"tok_APRO","payment_method_id":"visa"}},` +
	`"billing_details":{"name":"Ana Souza","email":"ana@example.com","tax_id":"529.982.247-25",` +
	`"address":{"line1":"Av. Paulista, 1000","city":"São Paulo","state":"SP","postal_code":"01310-100","country":"BR"}}}`

// row returns the one table row of page whose opening tag carries attr.
func row(t *testing.T, page, attr string) string {
	t.Helper()
	rows := regexp.MustCompile(`(?s)<tr `+regexp.QuoteMeta(attr)+`[^>]*>.*?</tr>`).FindAllString(page, -1)
	if len(rows) != 1 {
		t.Fatalf("%d rows with %s, want 1:\n%s", len(rows), attr, page)
	}
	return rows[0]
}

func wantIn(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Fatalf("%s lacks %q:\n%s", what, p, s)
		}
	}
}

// A payment that failed over shows where it ended and where each attempt
// went, with the failure that moved it; the stuck list shows each
// payment's provider.
func TestPagesShowProviders(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	atStripe := createPayment(t, e, "pedido-stripe", "pm_card_visa", http.StatusCreated)
	if _, err := e.Accounts.SetProvider(context.Background(), e.Account.ID, payment.ProviderMercadoPago,
		account.Secrets{MercadoPagoToken: "TEST-console-fo-" + apitest.SecretSuffix(t)}); err != nil {
		t.Fatalf("add mercadopago: %v", err)
	}
	e.Sim.RevokeSecret("sk_test_" + apitest.SecretSuffix(t))
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-failover", Body: failoverBody})
	var p struct{ ID, Provider string }
	if err := json.Unmarshal(r.Body, &p); err != nil || r.Status != http.StatusCreated || p.Provider != payment.ProviderMercadoPago {
		t.Fatalf("create = %d %s, want 201 at mercadopago", r.Status, r.Body)
	}
	v, err := e.Operations.AdminGet(context.Background(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Attempts) != 2 {
		t.Fatalf("%d attempts, want 2", len(v.Attempts))
	}
	first, second := v.Attempts[0], v.Attempts[1]

	c := newClient(t, e)
	c.signIn("Ana", apitest.AdminToken)
	res, page := c.do(http.MethodGet, "/console/payments/"+p.ID, nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("payment page = %d:\n%s", res.StatusCode, page)
	}
	wantIn(t, "payment page", page, `<th scope="col">Provider</th><th scope="col">Provider key</th>`,
		`id="payment-provider">mercadopago</span>`)
	wantIn(t, "attempt 1", row(t, page, `data-attempt-id="`+first.ID+`"`), `data-provider="stripe"`,
		`<td class="mono">stripe</td><td class="mono">pedido-failover:autorizar-v1</td>`, `failed`, `<code>provider_authentication</code>`)
	wantIn(t, "attempt 2", row(t, page, `data-attempt-id="`+second.ID+`"`), `data-provider="mercadopago"`,
		`<td class="mono">mercadopago</td><td class="mono">pedido-failover:autorizar-v2</td>`, `succeeded`)

	_, page = c.do(http.MethodGet, "/console/payments/"+atStripe, nil)
	wantIn(t, "Stripe payment page", page, `id="payment-provider">stripe</span>`)

	_, page = c.do(http.MethodGet, "/console/payments?status=authorized&status=captured", nil)
	wantIn(t, "stuck list", page, `<th scope="col">Order</th><th scope="col">Provider</th>`)
	wantIn(t, "failed-over row", row(t, page, `data-payment-id="`+p.ID+`"`), `<td>pedido-failover</td><td class="mono">mercadopago</td>`)
	wantIn(t, "Stripe row", row(t, page, `data-payment-id="`+atStripe+`"`), `<td>pedido-stripe</td><td class="mono">stripe</td>`)
}

// unreachable is Stripe's adapter answering, while down is set, that an
// authorization never reached Stripe.
type unreachable struct {
	provider.Provider
	down *atomic.Bool
}

func (u unreachable) Authorize(ctx context.Context, c provider.Credentials, r provider.AuthorizeRequest) provider.Result {
	if u.down.Load() {
		return provider.Result{Answer: provider.AnswerInvalid, FailureCode: payment.FailureProviderUnreachable,
			FailureMessage: "connection refused"}
	}
	return u.Provider.Authorize(ctx, c, r)
}

// The overview shows each provider's circuit, by name, and an open one
// when a provider proved unreachable.
func TestOverviewShowsProviderCircuits(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	e := apitest.New(t, apitest.Options{CircuitFailures: 1, CircuitCooldown: time.Hour,
		WrapProvider: apitest.WrapStripe(func(p provider.Provider) provider.Provider { return unreachable{p, &down} })})
	c := newClient(t, e)
	c.signIn("Ana", apitest.AdminToken)
	circuits := regexp.MustCompile(`(?s)<table id="circuits">.*?</table>`)
	state := regexp.MustCompile(`data-provider="([a-z_]+)" data-state="([a-z_]+)"`)
	look := func() string {
		t.Helper()
		res, page := c.do(http.MethodGet, "/console/", nil)
		table := circuits.FindString(page)
		if res.StatusCode != http.StatusOK || table == "" {
			t.Fatalf("overview = %d without the circuits table:\n%s", res.StatusCode, page)
		}
		wantIn(t, "overview", page, `<h2 id="circuits-h">Provider circuits</h2>`, `id="circuits-note"`,
			`<th scope="col">Provider</th><th scope="col">Circuit</th>`)
		var got []string
		for _, m := range state.FindAllStringSubmatch(table, -1) {
			got = append(got, m[1]+" "+m[2])
		}
		return strings.Join(got, ", ")
	}
	if got := look(); got != "mercadopago closed, stripe closed" {
		t.Fatalf("circuits %q, want both closed, by name", got)
	}
	down.Store(true)
	createPayment(t, e, "pedido-sem-rede", "pm_card_visa", http.StatusCreated)
	if got := look(); got != "mercadopago closed, stripe open" {
		t.Fatalf("circuits %q, want Stripe's open", got)
	}
	if st := e.Payments.CircuitStates(); st[payment.ProviderStripe] != payment.CircuitOpen {
		t.Fatalf("service circuits %v", st)
	}
}
