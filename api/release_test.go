package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// browserConfirm pays an intent as the customer's old checkout page would:
// Stripe.js with a publishable key and the client secret it was given.
func browserConfirm(t *testing.T, simURL, intentID, clientSecret string) int {
	t.Helper()
	form := url.Values{"client_secret": {clientSecret}, "payment_method": {"pm_card_visa"}}
	req, err := http.NewRequest(http.MethodPost, simURL+"/v1/payment_intents/"+intentID+"/confirm", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer pk_test_storefront")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// attemptsOf lists an admin view's attempts as "provider_key status".
func attemptsOf(v adminView) []string {
	var out []string
	for _, a := range v.Attempts {
		out = append(out, a.ProviderKey+" "+a.Status)
	}
	return out
}

func wantAttempt(t *testing.T, v adminView, want string) {
	t.Helper()
	for _, a := range attemptsOf(v) {
		if a == want {
			return
		}
	}
	t.Fatalf("attempts = %q, want one %q", attemptsOf(v), want)
}

// After a decline the intent awaits another payment method and the
// customer's page still holds its client secret: the service cancels it at
// the provider before the order's next attempt, so the old page can never
// charge beside attempt 2.
func TestDeclinedIntentIsCanceledBeforeTheNextAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, pm string
		decline  func(t *testing.T, w asyncEnv, p map[string]any)
	}{
		{"CardDeclined", "pm_card_chargeDeclined", func(t *testing.T, w asyncEnv, p map[string]any) {}},
		{"ThreeDSecureFailed", "pm_card_threeDSecure2Required", func(t *testing.T, w asyncEnv, p map[string]any) {
			w.transition(t, "fail", p["provider_payment_id"].(string))
			w.hooks(t)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newAsyncEnv(t)
			order := "pedido-rel-" + strings.ToLower(tc.name)
			body := `{"order_id":"` + order + `","amount":2000,"currency":"BRL","payment_method":"` + tc.pm + `","return_url":"https://loja.example/retorno"}`
			r := w.create("k-1", body)
			wantStatus(t, r, http.StatusCreated)
			p := r.JSON(t)
			intentID := p["provider_payment_id"].(string)
			tc.decline(t, w, p)
			w.hooks(t)
			if got := w.get(t, p["id"].(string)); got["status"] != "declined" {
				t.Fatalf("payment = %v, want declined", got["status"])
			}

			in := w.intent(t, intentID)
			if st := w.Sim.StatsFor(w.stripeKey); st.Cancels != 1 || in.Status != "canceled" {
				t.Fatalf("cancels at the provider = %d, intent %s; want 1 and canceled", st.Cancels, in.Status)
			}
			wantKeys(t, opRequests(w.Sim, "cancel"), order+":cancelar-v1")
			wantAttempt(t, adminGet(t, w.Env, p["id"].(string)), order+":cancelar-v1 succeeded")

			// The old page tries again with the secret it holds: refused.
			if st := browserConfirm(t, w.SimURL, intentID, in.ClientSecret); st != http.StatusBadRequest {
				t.Fatalf("confirm with the old client secret = %d, want 400", st)
			}
			r2 := w.create("k-2", strings.Replace(body, tc.pm, "pm_card_visa", 1))
			wantStatus(t, r2, http.StatusCreated)
			if p2 := r2.JSON(t); p2["status"] != "captured" || p2["attempt"] != float64(2) {
				t.Fatalf("attempt 2 = %s", r2.Body)
			}
			if st := w.Sim.StatsFor(w.stripeKey); st.Authorizations != 1 {
				t.Fatalf("charges at the provider = %d, want 1", st.Authorizations)
			}
		})
	}
}

// A release whose answer is lost holds the order: a next attempt is
// refused, without reserving its key, until the reconciler has canceled
// the intent with the same provider key.
func TestLostReleaseHoldsTheNextAttempt(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	lost := e.Sim.Inject(providersim.Fault{Op: "cancel", Kind: providersim.Error500BeforeEffect})
	declined := createBody("pedido-rel-lost", 2000)
	declined = strings.Replace(declined, "pm_card_visa", "pm_card_chargeDeclined", 1)
	r := create(e, "k-1", declined)
	wantStatus(t, r, http.StatusCreated)
	p := r.JSON(t)
	if p["status"] != "declined" {
		t.Fatalf("create = %s, want declined", r.Body)
	}

	r2 := create(e, "k-2", createBody("pedido-rel-lost", 2000))
	wantProblem(t, r2, http.StatusConflict, "order_has_active_payment")
	if r2.JSON(t)["payment_id"] != p["id"] {
		t.Fatalf("payment_id = %v, want %v", r2.JSON(t)["payment_id"], p["id"])
	}
	if st := e.Sim.Stats(); st.Authorizations != 0 || st.Cancels != 0 {
		t.Fatalf("provider stats = %+v, want no charge and no cancel yet", st)
	}
	wantAttempt(t, adminGet(t, e, p["id"].(string)), "pedido-rel-lost:cancelar-v1 unknown")
	// An ops replay of the declined payment waits for the cancel as well.
	wantProblem(t, replay(e, p["id"].(string), "replay-held"), http.StatusConflict, "outcome_unknown")
	if keys := opRequests(e.Sim, "authorize"); len(keys) != 1 {
		t.Fatalf("authorizations sent = %q, want only attempt 1's", keys)
	}

	lost.Remove()
	e.Clock.Advance(time.Second)
	runOnce(t, e, nil)
	if st := e.Sim.Stats(); st.Cancels != 1 {
		t.Fatalf("cancels = %d, want 1", st.Cancels)
	}
	wantOnlyKey(t, opRequests(e.Sim, "cancel"), "pedido-rel-lost:cancelar-v1")
	wantAttempt(t, adminGet(t, e, p["id"].(string)), "pedido-rel-lost:cancelar-v1 succeeded")

	// The refused request reserved nothing: the same key now starts attempt 2.
	r3 := create(e, "k-2", createBody("pedido-rel-lost", 2000))
	wantStatus(t, r3, http.StatusCreated)
	if p3 := r3.JSON(t); p3["attempt"] != float64(2) || p3["status"] != "authorized" {
		t.Fatalf("attempt 2 = %s", r3.Body)
	}
}

// A merchant's cancel of a waiting Boleto whose answer was lost before it
// reached the provider: past the key's re-send window the reconciler looks
// the intent up, finds it still waiting and fails the cancel as having had
// no effect, and the merchant may cancel again.
func TestLostCancelOfAWaitingBoletoIsDecidedByLookup(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	order := "pedido-bol-lost-cancel"
	r := create(e, "k-bol", bodyFor(boletoBody, order))
	p := requiresAction(t, r, "boleto_display_details")
	id := p["id"].(string)

	lost := e.Sim.Inject(providersim.Fault{Op: "cancel", Kind: providersim.Error500BeforeEffect, Times: 1})
	c := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/cancel", Key: "k-cancel-1"})
	wantStatus(t, c, http.StatusAccepted)
	if lost.Hits() != 1 {
		t.Fatalf("fault hits = %d, want 1", lost.Hits())
	}

	e.Clock.Advance(25 * time.Hour) // past the provider key's retention
	runOnce(t, e, nil)
	v := adminGet(t, e, id)
	wantAttempt(t, v, order+":cancelar-v1 failed")
	if v.Payment["status"] != "requires_action" {
		t.Fatalf("payment = %v, want still requires_action", v.Payment["status"])
	}
	if st := e.Sim.Stats(); st.Cancels != 0 {
		t.Fatalf("cancels = %d, want 0", st.Cancels)
	}
	wantKeys(t, opRequests(e.Sim, "cancel"), order+":cancelar-v1")

	c2 := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/cancel", Key: "k-cancel-2"})
	wantStatus(t, c2, http.StatusOK)
	if got := c2.JSON(t); got["status"] != "canceled" {
		t.Fatalf("second cancel = %s", c2.Body)
	}
	if st := e.Sim.Stats(); st.Cancels != 1 {
		t.Fatalf("cancels = %d, want 1", st.Cancels)
	}
	wantKeys(t, opRequests(e.Sim, "cancel"), order+":cancelar-v1", order+":cancelar-v2")
}

// The customer pays the declined intent on the old page while its cancel
// is held up: the provider refuses the cancel, the payment takes the
// provider's state, and the order's next attempt is refused as for any
// live payment, so nothing charges twice.
func TestReleaseRefusedBecauseTheCustomerPaidFirst(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	lost := e.Sim.Inject(providersim.Fault{Op: "cancel", Kind: providersim.Error500BeforeEffect})
	order := "pedido-rel-paid"
	body := `{"order_id":"` + order + `","amount":2000,"currency":"BRL","payment_method":"pm_card_chargeDeclined"}`
	r := create(e, "k-1", body)
	wantStatus(t, r, http.StatusCreated)
	p := r.JSON(t)
	var in providersim.Intent
	for _, q := range e.Sim.Requests() {
		for _, i := range e.Sim.Intents(q.SecretKey) {
			if i.ID == p["provider_payment_id"] {
				in = i
			}
		}
	}
	if st := browserConfirm(t, e.SimURL, in.ID, in.ClientSecret); st != http.StatusOK {
		t.Fatalf("the old page's confirm = %d, want 200 (the cancel has not reached the provider)", st)
	}

	lost.Remove()
	runOnce(t, e, nil)
	v := adminGet(t, e, p["id"].(string))
	wantAttempt(t, v, order+":cancelar-v1 failed")
	if v.Payment["status"] != "captured" || v.Payment["amount_captured"] != float64(2000) {
		t.Fatalf("payment = %v, want captured: the provider's state", v.Payment)
	}
	r2 := create(e, "k-2", createBody(order, 2000))
	wantProblem(t, r2, http.StatusConflict, "order_has_active_payment")
	if st := e.Sim.Stats(); st.Authorizations != 1 || st.Cancels != 0 {
		t.Fatalf("provider stats = %+v, want the old page's authorization only", st)
	}
}
