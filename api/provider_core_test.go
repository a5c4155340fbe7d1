package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/reconcile"
)

const mpPixBody = `{"order_id":"%s","amount":5000,"currency":"BRL","payment_method":"pix","expires_in":600,` +
	`"billing_details":{"name":"Ana Souza","email":"ana@example.com","tax_id":"529.982.247-25",` +
	`"address":{"line1":"Av. Paulista, 1000","city":"São Paulo","state":"SP","postal_code":"01310-100","country":"BR"}}}`

// mpMerchant is the test account with Mercado Pago as its first provider
// (accounts storage fills Providers on its own; the test builds it).
func mpMerchant(e *apitest.Env) payment.Account {
	m := e.Account.Merchant()
	m.Providers = []string{payment.ProviderMercadoPago, payment.ProviderStripe}
	m.ProviderCredentials = map[string]provider.Credentials{
		payment.ProviderMercadoPago: {SecretKey: "TEST-" + e.Account.ID},
		payment.ProviderStripe:      m.Credentials,
	}
	return m
}

// fixedAccounts answers every account lookup with one merchant.
type fixedAccounts struct{ m payment.Account }

func (f fixedAccounts) Merchant(context.Context, string) (payment.Account, error) { return f.m, nil }

// createAt runs a create for the merchant on the service directly and
// returns the payment.
func createAt(t *testing.T, e *apitest.Env, m payment.Account, key, body string) map[string]any {
	t.Helper()
	req, err := payment.ParseCreateRequest([]byte(body))
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	ans, err := e.Payments.Create(context.Background(), m, key, req)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	var p map[string]any
	if err := json.Unmarshal(ans.Body, &p); err != nil {
		t.Fatalf("decode %s: %v", ans.Body, err)
	}
	return p
}

func countOp(sim *providersim.Server, op string) int { return len(opRequests(sim, op)) }

func TestPaymentProvider(t *testing.T) {
	t.Parallel()
	t.Run("StripeAndMercadoPago", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		r := create(e, "k-card", createBody("pedido-card", 2000))
		wantStatus(t, r, http.StatusCreated)
		if got := r.JSON(t)["provider"]; got != "stripe" {
			t.Fatalf("card payment provider = %v, want stripe", got)
		}
		m := mpMerchant(e)
		p := createAt(t, e, m, "k-pix", fmt.Sprintf(mpPixBody, "pedido-pix"))
		if p["provider"] != "mercadopago" || p["status"] != "requires_action" {
			t.Fatalf("pix payment = %v", p)
		}
		if got := getPaymentJSON(t, e, p["id"].(string))["provider"]; got != "mercadopago" {
			t.Fatalf("read provider = %v, want mercadopago", got)
		}
		if countOp(e.Sim, "mp_create") != 1 || countOp(e.Sim, "authorize") != 1 {
			t.Fatalf("mp_create %d, authorize %d; want 1 and 1", countOp(e.Sim, "mp_create"), countOp(e.Sim, "authorize"))
		}
		attempts, err := e.ReconcileStore().AttemptListByPayment(context.Background(), p["id"].(string))
		if err != nil || len(attempts) != 1 || attempts[0].Provider != payment.ProviderMercadoPago {
			t.Fatalf("attempts %+v, %v; want one at mercadopago", attempts, err)
		}
		admin := e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments/" + p["id"].(string), Bearer: apitest.AdminToken})
		wantStatus(t, admin, http.StatusOK)
		var view struct {
			Attempts []struct {
				Provider string `json:"provider"`
			} `json:"attempts"`
		}
		if err := json.Unmarshal(admin.Body, &view); err != nil || len(view.Attempts) != 1 || view.Attempts[0].Provider != "mercadopago" {
			t.Fatalf("admin attempts %s (%v), want one at mercadopago", admin.Body, err)
		}
		// A card token is Stripe's whatever the account's first provider.
		c := createAt(t, e, m, "k-card-2", createBody("pedido-card-2", 2000))
		if c["provider"] != "stripe" {
			t.Fatalf("card payment of a Mercado Pago account = %v", c)
		}
	})

	t.Run("MissingEmailReservesNothing", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		req, err := payment.ParseCreateRequest([]byte(`{"order_id":"pedido-x","amount":5000,"currency":"BRL","payment_method":"pix"}`))
		if err != nil {
			t.Fatal(err)
		}
		m := mpMerchant(e)
		m.Providers = []string{payment.ProviderMercadoPago} // nothing else can take the Pix
		_, err = e.Payments.Create(context.Background(), m, "k-x", req)
		if payment.ErrorCode(err) != payment.CodeInvalidRequest {
			t.Fatalf("err %v, want invalid_request", err)
		}
		var keys, payments int
		if err := e.DB.Pool.QueryRow(context.Background(),
			`SELECT (SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM payments)`).Scan(&keys, &payments); err != nil {
			t.Fatal(err)
		}
		if keys != 0 || payments != 0 || countOp(e.Sim, "mp_create") != 0 {
			t.Fatalf("keys %d, payments %d, mp_create %d after a refused create", keys, payments, countOp(e.Sim, "mp_create"))
		}
	})

	t.Run("CardWithoutStripeReservesNothing", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		m := mpMerchant(e)
		m.Credentials = provider.Credentials{}
		m.Providers = []string{payment.ProviderMercadoPago}
		delete(m.ProviderCredentials, payment.ProviderStripe)
		req, err := payment.ParseCreateRequest([]byte(`{"order_id":"pedido-y","amount":5000,"currency":"BRL","payment_method":"pm_card_visa"}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Payments.Create(context.Background(), m, "k-y", req)
		if payment.ErrorCode(err) != payment.CodeInvalidRequest {
			t.Fatalf("err %v, want invalid_request", err)
		}
		var keys, payments int
		if err := e.DB.Pool.QueryRow(context.Background(),
			`SELECT (SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM payments)`).Scan(&keys, &payments); err != nil {
			t.Fatal(err)
		}
		if sent := countOp(e.Sim, "authorize") + countOp(e.Sim, "mp_create"); keys != 0 || payments != 0 || sent != 0 {
			t.Fatalf("keys %d, payments %d, provider creates %d after a refused create", keys, payments, sent)
		}
	})

	t.Run("RowsFromBeforeReadAsStripe", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		ctx := context.Background()
		// The insert lists of the release before attempts had a provider.
		_, err := e.DB.Pool.Exec(ctx, `
INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method,
                      customer_id, description, metadata, method_options, status, created_at, updated_at)
VALUES ('pay_old', $1, 'pedido-old', 1, 2000, 'BRL', 'automatic', 'pm_card_visa', '', '', '{}', '{}', 'failed', now(), now())`,
			e.Account.ID)
		if err != nil {
			t.Fatalf("insert: %v", err)
		}
		_, err = e.DB.Pool.Exec(ctx, `
INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status,
                      request, lease_expires_at, created_at, updated_at)
VALUES ('att_old', $1, 'pay_old', 'pedido-old', 'autorizar', 1, 'pedido-old:autorizar-v1', 'failed', '{}', NULL, now(), now())`,
			e.Account.ID)
		if err != nil {
			t.Fatalf("insert: %v", err)
		}
		if got := getPaymentJSON(t, e, "pay_old")["provider"]; got != "stripe" {
			t.Fatalf("provider = %v, want stripe", got)
		}
		attempts, err := e.ReconcileStore().AttemptListByPayment(ctx, "pay_old")
		if err != nil || len(attempts) != 1 || attempts[0].Provider != payment.ProviderStripe {
			t.Fatalf("attempts %+v, %v; want one at stripe", attempts, err)
		}
	})

	t.Run("LostMercadoPagoAnswerIsLookedUp", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		m := mpMerchant(e)
		// Two drops: Go's transport re-sends a POST carrying an
		// idempotency key once on a reused connection.
		drop := e.Sim.Inject(providersim.Fault{Op: "mp_create", Kind: providersim.DropAfterEffect, Times: 2})
		p := createAt(t, e, m, "k-lost", fmt.Sprintf(mpPixBody, "pedido-lost"))
		if p["status"] != "unknown" || p["provider"] != "mercadopago" {
			t.Fatalf("payment = %v, want unknown at mercadopago", p)
		}
		drop.Remove()
		sends := opRequests(e.Sim, "mp_create")
		wantOnlyKey(t, sends, "pedido-lost:autorizar-v1")
		r, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(),
			Accounts: fixedAccounts{m}, After: 0})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.RunOnce(context.Background()); err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		if got := getPaymentJSON(t, e, p["id"].(string))["status"]; got != "requires_action" {
			t.Fatalf("status after reconcile = %v, want requires_action", got)
		}
		// MERCADOPAGO_KEY_RETENTION is 0: resolved by a search, the key
		// never sent again.
		if got := countOp(e.Sim, "mp_create"); got != len(sends) {
			t.Fatalf("mp_create sends %d after reconcile, want %d", got, len(sends))
		}
		if countOp(e.Sim, "mp_search") == 0 {
			t.Fatalf("no search by attempt")
		}
		if n := len(e.Sim.MPPayments("TEST-" + e.Account.ID)); n != 1 {
			t.Fatalf("%d payments at Mercado Pago, want 1", n)
		}
	})
}

// TestMercadoPagoResendKeepsTheExpiry: with MERCADOPAGO_KEY_RETENTION set, a
// lost Pix authorization is recovered by re-sending its key; the clock has
// moved since, and the re-send still carries the first body (its expiry
// fixed in the stored attempt), so Mercado Pago replays instead of refusing
// the key as reused with another body.
func TestMercadoPagoResendKeepsTheExpiry(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{MercadoPagoKeyRetention: time.Hour})
	m := mpMerchant(e)
	// Two drops: Go's transport re-sends a POST carrying an idempotency
	// key once on a reused connection.
	drop := e.Sim.Inject(providersim.Fault{Op: "mp_create", Kind: providersim.DropAfterEffect, Times: 2})
	p := createAt(t, e, m, "k-exp", fmt.Sprintf(mpPixBody, "pedido-exp"))
	drop.Remove()
	if p["status"] != "unknown" {
		t.Fatalf("payment = %v, want unknown", p)
	}
	ctx := context.Background()
	attempts, err := e.ReconcileStore().AttemptListByPayment(ctx, p["id"].(string))
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts %+v, %v", attempts, err)
	}
	var stored provider.AuthorizeRequest
	if err := json.Unmarshal(attempts[0].Request, &stored); err != nil {
		t.Fatal(err)
	}
	if want := attempts[0].CreatedAt.Add(600 * time.Second); !stored.ExpiresAt.Equal(want) {
		t.Fatalf("stored expiry %v, want the attempt's creation + expires_in %v", stored.ExpiresAt, want)
	}
	sent := countOp(e.Sim, "mp_create")
	// The recovery's lookup goes first: the search not showing the payment
	// yet leaves it to the re-send.
	e.Sim.SetMPSearchLag(time.Hour)

	e.Clock.Advance(5 * time.Minute)
	r, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(),
		Accounts: fixedAccounts{m}, After: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	var resends []providersim.Request
	for _, q := range e.Sim.Requests() {
		if q.Op == "mp_create" {
			resends = append(resends, q)
		}
	}
	if len(resends) != sent+1 {
		t.Fatalf("mp_create sends %d, want the %d lost and one re-send", len(resends), sent)
	}
	if last := resends[len(resends)-1]; !last.Replayed || last.Status >= 300 {
		t.Fatalf("re-send answered %d (replayed %v), want the first answer replayed", last.Status, last.Replayed)
	}
	got := getPaymentJSON(t, e, p["id"].(string))
	if got["status"] != "requires_action" {
		t.Fatalf("status after reconcile = %v, want requires_action", got["status"])
	}
	na, _ := got["next_action"].(map[string]any)
	qr, _ := na["pix_display_qr_code"].(map[string]any)
	if want := stored.ExpiresAt.UTC().Format(time.RFC3339); qr["expires_at"] != want {
		t.Fatalf("next_action %v, want expires_at %s", na, want)
	}
	if n := len(e.Sim.MPPayments("TEST-" + e.Account.ID)); n != 1 {
		t.Fatalf("%d payments at Mercado Pago, want 1", n)
	}
}
