package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// failoverShop is the test account with Stripe first and Mercado Pago
// second.
type failoverShop struct {
	*apitest.Env
	mpToken string
}

func newFailoverShop(t *testing.T, opts apitest.Options) *failoverShop {
	t.Helper()
	e := apitest.New(t, opts)
	s := &failoverShop{Env: e, mpToken: "TEST-fo-" + apitest.SecretSuffix(t)}
	if _, err := e.Accounts.SetProvider(context.Background(), e.Account.ID, payment.ProviderMercadoPago,
		account.Secrets{MercadoPagoToken: s.mpToken}); err != nil {
		t.Fatalf("add mercadopago: %v", err)
	}
	return s
}

func bothCardsBody(order string) string {
	return fmt.Sprintf(`{"order_id":%q,"amount":2500,"currency":"BRL",`+
		`"payment_methods":{"stripe":"pm_card_visa","mercadopago":{"token":"tok_APRO","payment_method_id":"visa"}},`+mpBilling+`}`, order)
}

// attemptTrail lists a payment's attempts as "provider key status code".
func attemptTrail(t *testing.T, e *apitest.Env, paymentID string) []string {
	t.Helper()
	as, err := e.ReconcileStore().AttemptListByPayment(context.Background(), paymentID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s %s %s %s", a.Provider, a.ProviderKey, a.Status, a.FailureCode))
	}
	return out
}

func wantAttempts(t *testing.T, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("attempts\n got %q\nwant %q", got, want)
	}
}

// A create fails over to the next provider of its route only on an answer
// that proves the first did nothing; anything in doubt stays unknown.
func TestFailover(t *testing.T) {
	t.Parallel()

	t.Run("CredentialsRefusedOnAFirstSend", func(t *testing.T) {
		t.Parallel()
		s := newFailoverShop(t, apitest.Options{})
		s.Sim.RevokeSecret("sk_test_" + apitest.SecretSuffix(t))
		r := create(s.Env, "k-fo-1", bothCardsBody("pedido-fo-1"))
		wantStatus(t, r, http.StatusCreated)
		p := r.JSON(t)
		if p["status"] != "captured" || p["provider"] != "mercadopago" || p["attempt"] != float64(2) {
			t.Fatalf("payment %s", r.Body)
		}
		id := p["id"].(string)
		wantAttempts(t, attemptTrail(t, s.Env, id),
			"stripe pedido-fo-1:autorizar-v1 failed provider_authentication",
			"mercadopago pedido-fo-1:autorizar-v2 succeeded ")
		mps := s.Sim.MPPayments(s.mpToken)
		if len(mps) != 1 || mps[0].IdempotencyKey != "pedido-fo-1:autorizar-v2" {
			t.Fatalf("at Mercado Pago: %+v", mps)
		}
		calls := s.PaymentCalls()
		again := create(s.Env, "k-fo-1", bothCardsBody("pedido-fo-1"))
		if again.Status != http.StatusCreated || string(again.Body) != string(r.Body) || s.PaymentCalls() != calls {
			t.Fatalf("replay: %d %s, %d new provider calls", again.Status, again.Body, s.PaymentCalls()-calls)
		}
		audit := s.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments/" + id, Bearer: apitest.AdminToken})
		wantStatus(t, audit, http.StatusOK)
		if body := string(audit.Body); !strings.Contains(body, `"payment.failover"`) || !strings.Contains(body, `"from":"stripe"`) || !strings.Contains(body, `"to":"mercadopago"`) {
			t.Fatalf("admin detail lacks the failover: %s", audit.Body)
		}
	})

	t.Run("LostAnswerAfterAFailoverIsResolvedWhereItWasSent", func(t *testing.T) {
		t.Parallel()
		s := newFailoverShop(t, apitest.Options{})
		s.Sim.RevokeSecret("sk_test_" + apitest.SecretSuffix(t))
		drop := s.Sim.Inject(providersim.Fault{Op: "mp_create", Kind: providersim.DropAfterEffect, Times: 2})
		r := create(s.Env, "k-fo-5", bothCardsBody("pedido-fo-5"))
		wantStatus(t, r, http.StatusAccepted)
		p := r.JSON(t)
		if p["status"] != "unknown" || p["provider"] != "mercadopago" || p["attempt"] != float64(2) {
			t.Fatalf("payment %s", r.Body)
		}
		drop.Remove()
		sends := countOp(s.Sim, "mp_create")
		s.Clock.Advance(time.Minute)
		runOnce(t, s.Env, nil)
		id := p["id"].(string)
		if got := getPaymentJSON(t, s.Env, id); got["status"] != "captured" || got["provider"] != "mercadopago" {
			t.Fatalf("after reconcile: %v", got)
		}
		wantAttempts(t, attemptTrail(t, s.Env, id),
			"stripe pedido-fo-5:autorizar-v1 failed provider_authentication",
			"mercadopago pedido-fo-5:autorizar-v2 succeeded ")
		if countOp(s.Sim, "mp_create") != sends || countOp(s.Sim, "mp_search") == 0 {
			t.Fatalf("the reconciler re-sent the key (%d→%d) or did not search", sends, countOp(s.Sim, "mp_create"))
		}
		if mps := s.Sim.MPPayments(s.mpToken); len(mps) != 1 {
			t.Fatalf("%d payments at Mercado Pago, want 1", len(mps))
		}
	})

	t.Run("NoOtherProviderForTheCard", func(t *testing.T) {
		t.Parallel()
		s := newFailoverShop(t, apitest.Options{})
		s.Sim.RevokeSecret("sk_test_" + apitest.SecretSuffix(t))
		r := create(s.Env, "k-fo-2", `{"order_id":"pedido-fo-2","amount":2500,"currency":"BRL","payment_methods":{"stripe":"pm_card_visa"}}`)
		wantStatus(t, r, http.StatusCreated)
		if p := r.JSON(t); p["status"] != "failed" || p["failure_code"] != "provider_authentication" || p["provider"] != "stripe" {
			t.Fatalf("payment %s", r.Body)
		}
		if n := countOp(s.Sim, "mp_create"); n != 0 {
			t.Fatalf("%d creates at Mercado Pago, want 0", n)
		}
	})

	for _, tc := range []struct {
		name string
		kind providersim.FaultKind
	}{{"ServerErrorStaysUnknown", providersim.Error500BeforeEffect}, {"RateLimitStaysUnknown", providersim.RateLimit429BeforeEffect},
		{"LostAnswerStaysUnknown", providersim.DropAfterEffect}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newFailoverShop(t, apitest.Options{})
			s.Sim.Inject(providersim.Fault{Op: "authorize", Kind: tc.kind, Times: 2})
			r := create(s.Env, "k-fo-3", bothCardsBody("pedido-fo-3"))
			wantStatus(t, r, http.StatusAccepted)
			p := r.JSON(t)
			if p["status"] != "unknown" || p["provider"] != "stripe" || p["attempt"] != float64(1) {
				t.Fatalf("payment %s", r.Body)
			}
			if n := countOp(s.Sim, "mp_create"); n != 0 {
				t.Fatalf("%d requests at Mercado Pago, want none", n)
			}
			s.Sim.ClearFaults()
			runOnce(t, s.Env, nil)
			got := getPaymentJSON(t, s.Env, p["id"].(string))
			if got["provider"] != "stripe" || (got["status"] != "captured" && got["status"] != "failed") {
				t.Fatalf("after reconcile: %v", got)
			}
			if n := countOp(s.Sim, "mp_create"); n != 0 {
				t.Fatalf("%d requests at Mercado Pago after reconcile, want none", n)
			}
		})
	}

	t.Run("DeclineIsFinal", func(t *testing.T) {
		t.Parallel()
		s := newFailoverShop(t, apitest.Options{})
		body := `{"order_id":"pedido-fo-4","amount":2500,"currency":"BRL",` +
			`"payment_methods":{"stripe":"pm_card_chargeDeclined","mercadopago":{"token":"tok_APRO","payment_method_id":"visa"}},` + mpBilling + `}`
		r := create(s.Env, "k-fo-4", body)
		wantStatus(t, r, http.StatusCreated)
		if p := r.JSON(t); p["status"] != "declined" || p["provider"] != "stripe" {
			t.Fatalf("payment %s", r.Body)
		}
		if n := countOp(s.Sim, "mp_create"); n != 0 {
			t.Fatalf("%d requests at Mercado Pago, want none", n)
		}
	})
}

// A create follows the account's routing: the first rule that matches
// gives the providers in order, and a failover goes down that order.
func TestCreateFollowsRouting(t *testing.T) {
	t.Parallel()
	s := newFailoverShop(t, apitest.Options{})
	wantStatus(t, adminRouting(s.Env, http.MethodPut, s.Account.ID, `{"rules":[{"match":{"payment_method":"pix"},"providers":["mercadopago","stripe"]},`+
		`{"match":{"payment_method":"card","min_amount":100000},"providers":["mercadopago","stripe"]}],"default":["stripe","mercadopago"]}`), http.StatusOK)
	pix := func(order string) string {
		return fmt.Sprintf(`{"order_id":%q,"amount":2500,"currency":"BRL","payment_method":"pix",%s}`, order, mpBilling)
	}
	for _, tc := range []struct{ order, body, provider string }{
		{"pedido-rt-1", pix("pedido-rt-1"), "mercadopago"},
		{"pedido-rt-2", bothCardsBody("pedido-rt-2"), "stripe"},
		{"pedido-rt-3", strings.Replace(bothCardsBody("pedido-rt-3"), `"amount":2500`, `"amount":150000`, 1), "mercadopago"},
		// A card token is Stripe's whatever the rule says.
		{"pedido-rt-4", `{"order_id":"pedido-rt-4","amount":150000,"currency":"BRL","payment_method":"pm_card_visa"}`, "stripe"},
	} {
		r := create(s.Env, "k-"+tc.order, tc.body)
		wantStatus(t, r, http.StatusCreated)
		if got := r.JSON(t)["provider"]; got != tc.provider {
			t.Fatalf("%s at %v, want %s", tc.order, got, tc.provider)
		}
	}
	// Mercado Pago refuses the credentials: the Pix goes on to Stripe.
	s.Sim.RevokeSecret(s.mpToken)
	r := create(s.Env, "k-rt-5", pix("pedido-rt-5"))
	wantStatus(t, r, http.StatusCreated)
	p := r.JSON(t)
	wantAttempts(t, attemptTrail(t, s.Env, p["id"].(string)),
		"mercadopago pedido-rt-5:autorizar-v1 failed provider_authentication",
		"stripe pedido-rt-5:autorizar-v2 waiting ")
	if p["provider"] != "stripe" || p["status"] != "requires_action" {
		t.Fatalf("payment %s", r.Body)
	}
}
