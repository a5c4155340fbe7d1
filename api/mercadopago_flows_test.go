package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider/providersim"
)

const mpBilling = `"billing_details":{"name":"Ana Souza","email":"ana@example.com","tax_id":"529.982.247-25",` +
	`"address":{"line1":"Av. Paulista, 1000","city":"São Paulo","state":"SP","postal_code":"01310-100","country":"BR"}}`

// mpShop is an account created through the account service with Mercado
// Pago first and, when stripe is set, Stripe after it.
type mpShop struct {
	*apitest.Env
	id, apiKey, token string
}

func newMPShop(t *testing.T, stripe bool) *mpShop {
	t.Helper()
	s := newMPShopWith(t, apitest.Options{})
	if stripe {
		if _, err := s.Accounts.SetProvider(context.Background(), s.id, payment.ProviderStripe, account.Secrets{StripeSecret: "sk_test_mp_" + apitest.SecretSuffix(t)}); err != nil {
			t.Fatalf("add stripe: %v", err)
		}
	}
	return s
}

func newMPShopWith(t *testing.T, opts apitest.Options) *mpShop {
	t.Helper()
	e := apitest.New(t, opts)
	ctx := context.Background()
	s := &mpShop{Env: e, token: "TEST-mp-" + apitest.SecretSuffix(t)}
	a, key, err := e.Accounts.CreateWith(ctx, "Loja MP", account.Secrets{MercadoPagoToken: s.token, MercadoPagoWebhookSecret: "mpwh_" + apitest.SecretSuffix(t)})
	if err != nil {
		t.Fatalf("create account: %v", err)
	}
	s.id, s.apiKey = a.ID, key
	return s
}

func (s *mpShop) create(key, body string) *apitest.Response {
	return s.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: body, Bearer: s.apiKey})
}

func (s *mpShop) post(path, key, body string) *apitest.Response {
	return s.Do(apitest.Request{Method: http.MethodPost, Path: path, Key: key, Body: body, Bearer: s.apiKey})
}

func (s *mpShop) get(id string) map[string]any {
	s.T.Helper()
	r := s.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id, Bearer: s.apiKey})
	wantStatus(s.T, r, http.StatusOK)
	return r.JSON(s.T)
}

// payments are the account's payments at the simulated Mercado Pago.
func (s *mpShop) payments() []providersim.MPPayment { return s.Sim.MPPayments(s.token) }

// onePayment checks that Mercado Pago holds exactly one payment, made with
// the attempt's derived key, and returns it.
func (s *mpShop) onePayment(t *testing.T, order string) providersim.MPPayment {
	t.Helper()
	ps := s.payments()
	if len(ps) != 1 {
		t.Fatalf("%d payments at Mercado Pago, want 1: %+v", len(ps), ps)
	}
	if want := order + ":autorizar-v1"; ps[0].IdempotencyKey != want {
		t.Fatalf("payment made with key %q, want %q", ps[0].IdempotencyKey, want)
	}
	return ps[0]
}

func mpCardBody(order, token, capture string) string {
	return fmt.Sprintf(`{"order_id":%q,"amount":2500,"currency":"BRL","capture_method":%q,`+
		`"payment_methods":{"stripe":"pm_card_visa","mercadopago":{"token":%q,"payment_method_id":"visa","installments":3}},`+
		`"return_url":"https://loja.example/volta",`+mpBilling+`}`, order, capture, token)
}

// A card, a 3-D Secure card, a Pix and a Boleto complete on Mercado Pago:
// one payment there per attempt whatever the retries, each answer replayed.
func TestMercadoPagoFlows(t *testing.T) {
	t.Parallel()

	t.Run("CardCapturedOnceWhateverTheRetries", func(t *testing.T) {
		t.Parallel()
		s := newMPShop(t, true)
		body := mpCardBody("pedido-mp-1", "tok_APRO", "automatic")
		first := s.create("k-mp-1", body)
		wantStatus(t, first, http.StatusCreated)
		p := first.JSON(t)
		if p["status"] != "captured" || p["provider"] != "mercadopago" || p["amount_captured"] != float64(2500) {
			t.Fatalf("payment %s", first.Body)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r, err := s.TryDo(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-mp-1", Body: body, Bearer: s.apiKey}); err != nil || r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("retry: %v %+v", err, r)
				}
			}()
		}
		wg.Wait()
		mp := s.onePayment(t, "pedido-mp-1")
		if mp.Status != "approved" || !mp.Captured || mp.PaymentMethodID != "visa" {
			t.Fatalf("at Mercado Pago: %+v", mp)
		}
		if n := countOp(s.Sim, "authorize"); n != 0 {
			t.Fatalf("%d authorizations at Stripe, want 0", n)
		}
		other := s.create("k-mp-1", strings.Replace(body, `"installments":3`, `"installments":2`, 1))
		wantStatus(t, other, http.StatusUnprocessableEntity)
	})

	t.Run("ManualCardCapturedAndRefunded", func(t *testing.T) {
		t.Parallel()
		s := newMPShop(t, false)
		r := s.create("k-mp-2", mpCardBody("pedido-mp-2", "tok_APRO", "manual"))
		wantStatus(t, r, http.StatusCreated)
		p := r.JSON(t)
		id := p["id"].(string)
		if p["status"] != "authorized" {
			t.Fatalf("payment %s", r.Body)
		}
		// The provider saw capture:false: the money is only held.
		if mp := s.onePayment(t, "pedido-mp-2"); mp.Status != "authorized" || mp.Captured {
			t.Fatalf("at Mercado Pago before capture: %+v", mp)
		}
		for range 2 {
			wantStatus(t, s.post("/v1/payments/"+id+"/capture", "k-mp-2-cap", `{}`), http.StatusOK)
		}
		for range 2 {
			wantStatus(t, s.post("/v1/payments/"+id+"/refunds", "k-mp-2-ref", `{"amount":1000}`), http.StatusCreated)
		}
		got := s.get(id)
		if got["status"] != "captured" || got["amount_refunded"] != float64(1000) {
			t.Fatalf("payment after capture and refund: %v", got)
		}
		mp := s.onePayment(t, "pedido-mp-2")
		if !mp.Captured || mp.Refunded != 1000 {
			t.Fatalf("at Mercado Pago: %+v", mp)
		}
		if c, f := countOp(s.Sim, "mp_update"), countOp(s.Sim, "mp_refund"); c != 1 || f != 1 {
			t.Fatalf("captures sent %d, refunds sent %d; want 1 and 1", c, f)
		}
	})

	t.Run("ManualCardCanceled", func(t *testing.T) {
		t.Parallel()
		s := newMPShop(t, false)
		r := s.create("k-mp-3", mpCardBody("pedido-mp-3", "tok_APRO", "manual"))
		wantStatus(t, r, http.StatusCreated)
		id := r.JSON(t)["id"].(string)
		wantStatus(t, s.post("/v1/payments/"+id+"/cancel", "k-mp-3-cancel", `{}`), http.StatusOK)
		if got := s.get(id)["status"]; got != "canceled" {
			t.Fatalf("status %v, want canceled", got)
		}
		if mp := s.onePayment(t, "pedido-mp-3"); mp.Status != "cancelled" {
			t.Fatalf("at Mercado Pago: %+v", mp)
		}
	})

	t.Run("Declined", func(t *testing.T) {
		t.Parallel()
		s := newMPShop(t, false)
		r := s.create("k-mp-4", mpCardBody("pedido-mp-4", "tok_OTHE", "automatic"))
		wantStatus(t, r, http.StatusCreated)
		if p := r.JSON(t); p["status"] != "declined" || p["failure_code"] == nil {
			t.Fatalf("payment %s", r.Body)
		}
		s.onePayment(t, "pedido-mp-4")
	})

	t.Run("ThreeDSecureChallenge", func(t *testing.T) {
		t.Parallel()
		s := newMPShop(t, false)
		r := s.create("k-mp-5", mpCardBody("pedido-mp-5", "tok_3DS_APRO", "automatic"))
		wantStatus(t, r, http.StatusCreated)
		p := r.JSON(t)
		na, _ := p["next_action"].(map[string]any)
		redirect, _ := na["redirect_to_url"].(map[string]any)
		if p["status"] != "requires_action" || na["type"] != "redirect_to_url" || redirect["return_url"] != "https://loja.example/volta" {
			t.Fatalf("payment %s", r.Body)
		}
		// The frontend posts the challenge's creq to the url: the answer
		// carries it as client_secret (the simulator's creq is creq_{id}).
		if want := fmt.Sprint("creq_", p["provider_payment_id"]); p["client_secret"] != want {
			t.Fatalf("client_secret %v, want the challenge's creq %s", p["client_secret"], want)
		}
		s.customerActs(t, redirect["url"].(string), "approve")
		s.Clock.Advance(time.Minute)
		runOnce(t, s.Env, nil)
		if got := s.get(p["id"].(string))["status"]; got != "captured" {
			t.Fatalf("status after the challenge = %v, want captured", got)
		}
		s.onePayment(t, "pedido-mp-5")
	})

	t.Run("PixWithOnlyTheEmail", func(t *testing.T) {
		t.Parallel()
		s := newMPShop(t, true)
		r := s.create("k-mp-7", `{"order_id":"pedido-mp-7","amount":5000,"currency":"BRL","payment_method":"pix","billing_details":{"email":"ana@example.com"}}`)
		wantStatus(t, r, http.StatusCreated)
		if p := r.JSON(t); p["provider"] != "mercadopago" || p["status"] != "requires_action" {
			t.Fatalf("payment %s", r.Body)
		}
		s.onePayment(t, "pedido-mp-7")
		// A Boleto needs the payer whole.
		wantStatus(t, s.create("k-mp-8", `{"order_id":"pedido-mp-8","amount":5000,"currency":"BRL","payment_method":"boleto","billing_details":{"email":"ana@example.com"}}`), http.StatusBadRequest)
	})

	t.Run("NothingToTryReservesNothing", func(t *testing.T) {
		t.Parallel()
		s := newMPShop(t, false)
		for _, tc := range []struct{ body, field string }{
			// Stripe's card on an account that has only Mercado Pago.
			{`{"order_id":"pedido-mp-6","amount":2500,"currency":"BRL","payment_methods":{"stripe":"pm_card_visa"},` + mpBilling + `}`, "payment_methods.mercadopago"},
			// Mercado Pago's card without the payer's email.
			{`{"order_id":"pedido-mp-6","amount":2500,"currency":"BRL","payment_methods":{"mercadopago":{"token":"tok_APRO","payment_method_id":"visa"}}}`, "billing_details.email"},
			{`{"order_id":"pedido-mp-6","amount":2500,"currency":"BRL","payment_method":"pix","payment_methods":{"stripe":"pm_card_visa"}}`, "payment_methods"},
		} {
			r := s.create("k-mp-6", tc.body)
			wantStatus(t, r, http.StatusBadRequest)
			if !strings.Contains(string(r.Body), `"field":"`+tc.field+`"`) {
				t.Fatalf("%s: answer %s does not name %s", tc.body, r.Body, tc.field)
			}
		}
		var keys, payments int
		if err := s.DB.Pool.QueryRow(context.Background(),
			`SELECT (SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM payments)`).Scan(&keys, &payments); err != nil {
			t.Fatal(err)
		}
		if keys != 0 || payments != 0 || len(s.payments()) != 0 {
			t.Fatalf("keys %d, payments %d, at Mercado Pago %d after refused creates", keys, payments, len(s.payments()))
		}
	})

	for _, method := range []string{"pix", "boleto"} {
		t.Run("PaidLater_"+method, func(t *testing.T) {
			t.Parallel()
			s := newMPShop(t, true)
			order := "pedido-mp-" + method
			body := fmt.Sprintf(`{"order_id":%q,"amount":5000,"currency":"BRL","payment_method":%q,%s}`, order, method, mpBilling)
			r := s.create("k-"+order, body)
			wantStatus(t, r, http.StatusCreated)
			p := r.JSON(t)
			na, _ := p["next_action"].(map[string]any)
			if p["status"] != "requires_action" || p["provider"] != "mercadopago" || na == nil {
				t.Fatalf("payment %s", r.Body)
			}
			wantStatus(t, s.create("k-"+order, body), http.StatusCreated)
			mp := s.onePayment(t, order)
			if _, err := s.Sim.MPPay(mp.ID); err != nil {
				t.Fatalf("pay: %v", err)
			}
			s.Clock.Advance(time.Minute)
			runOnce(t, s.Env, nil)
			if got := s.get(p["id"].(string)); got["status"] != "captured" || got["amount_captured"] != float64(5000) {
				t.Fatalf("payment after the customer paid: %v", got)
			}
			s.onePayment(t, order)
		})
	}
}

// customerActs presses a button of the simulator's hosted page.
func (s *mpShop) customerActs(t *testing.T, page, action string) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(page, url.Values{"action": {action}})
	if err != nil {
		t.Fatalf("%s %s: %v", action, page, err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		t.Fatalf("%s %s: %d", action, page, resp.StatusCode)
	}
}

// A lost Mercado Pago answer: with no key retention (the default) the
// reconciler finds the payment by its attempt and never sends the key
// again; with a retention, a re-send inside its window gets the first
// answer back. Either way there is one payment at Mercado Pago.
func TestMercadoPagoLostAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		retention time.Duration
		resent    bool
	}{{"LookedUpWithoutRetention", 0, false}, {"ResentWithinRetention", 24 * time.Hour, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newMPShopWith(t, apitest.Options{MercadoPagoKeyRetention: tc.retention})
			if tc.resent {
				// A lookup goes first and would find the payment: the
				// search not showing it yet leaves it to the re-send.
				s.Sim.SetMPSearchLag(time.Hour)
			}
			order := "pedido-mp-lost"
			// Two drops: Go's transport re-sends a POST carrying an
			// idempotency key once on a reused connection.
			drop := s.Sim.Inject(providersim.Fault{Op: "mp_create", Kind: providersim.DropAfterEffect, Times: 2})
			r := s.create("k-lost", mpCardBody(order, "tok_APRO", "automatic"))
			wantStatus(t, r, http.StatusAccepted)
			p := r.JSON(t)
			drop.Remove()
			sends, searches := countOp(s.Sim, "mp_create"), countOp(s.Sim, "mp_search")
			s.Clock.Advance(time.Minute)
			runOnce(t, s.Env, nil)
			if got := s.get(p["id"].(string))["status"]; got != "captured" {
				t.Fatalf("status after reconcile = %v, want captured", got)
			}
			resent := countOp(s.Sim, "mp_create") - sends
			if tc.resent != (resent > 0) || (!tc.resent && countOp(s.Sim, "mp_search") == searches) {
				t.Fatalf("re-sends %d, searches %d→%d; want re-sent %v", resent, searches, countOp(s.Sim, "mp_search"), tc.resent)
			}
			wantOnlyKey(t, opRequests(s.Sim, "mp_create"), order+":autorizar-v1")
			s.onePayment(t, order)
			// The client's retry gets the resolved answer.
			if again := s.create("k-lost", mpCardBody(order, "tok_APRO", "automatic")); again.Status != http.StatusCreated || again.JSON(t)["status"] != "captured" {
				t.Fatalf("retry after reconcile: %d %s", again.Status, again.Body)
			}
			s.onePayment(t, order)
		})
	}
}
