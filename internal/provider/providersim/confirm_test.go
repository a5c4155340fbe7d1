package providersim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	stripe "github.com/stripe/stripe-go/v76"
)

// browserConfirm confirms an intent as Stripe.js does from the customer's
// page: a publishable key and the intent's client secret.
func (e *env) browserConfirm(t *testing.T, id, clientSecret, pm string) (int, map[string]any) {
	t.Helper()
	res, body := e.raw(t, http.MethodPost, "/v1/payment_intents/"+id+"/confirm", "pk_test_storefront", "",
		url.Values{"client_secret": {clientSecret}, "payment_method": {pm}})
	var out map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("confirm body %q: %v", body, err)
	}
	return res.StatusCode, out
}

// A declined intent, and one whose 3-D Secure challenge failed, stay
// payable with their client secret, as at Stripe, until canceled.
func TestDeclinedIntentIsPayableWithItsClientSecretUntilCanceled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, pm string }{
		{"CardDeclined", "pm_card_chargeDeclined"},
		{"ThreeDSecureFailed", "pm_card_threeDSecure2Required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := start(t, Options{})
			api := e.client(keyA)
			pi, err := api.PaymentIntents.New(authorize("k-"+tc.name, tc.pm, "automatic", 2000, "pay_1"))
			if tc.pm == "pm_card_chargeDeclined" {
				pi = stripeErr(t, err, http.StatusPaymentRequired).PaymentIntent
			} else if _, err := e.sim.Fail(pi.ID); err != nil {
				t.Fatalf("fail challenge: %v", err)
			}
			got, err := api.PaymentIntents.Get(pi.ID, nil)
			if err != nil || got.Status != stripe.PaymentIntentStatusRequiresPaymentMethod {
				t.Fatalf("after the failure: %v %v, want requires_payment_method", got, err)
			}

			if st, _ := e.browserConfirm(t, pi.ID, "wrong_secret", "pm_card_visa"); st != http.StatusBadRequest {
				t.Fatalf("confirm with a wrong client secret = %d, want 400", st)
			}
			st, body := e.browserConfirm(t, pi.ID, pi.ClientSecret, "pm_card_visa")
			if st != http.StatusOK || body["status"] != "succeeded" {
				t.Fatalf("confirm with the client secret = %d %v, want 200 succeeded", st, body["status"])
			}
			if n := e.sim.StatsFor(keyA).Authorizations; n != 1 {
				t.Fatalf("authorizations = %d, want 1", n)
			}
		})
	}
	t.Run("CanceledIsNotPayable", func(t *testing.T) {
		t.Parallel()
		e := start(t, Options{})
		api := e.client(keyA)
		_, err := api.PaymentIntents.New(authorize("k-cancel", "pm_card_chargeDeclined", "automatic", 2000, "pay_2"))
		pi := stripeErr(t, err, http.StatusPaymentRequired).PaymentIntent
		if _, err := api.PaymentIntents.Cancel(pi.ID, withKey(&stripe.PaymentIntentCancelParams{}, "k-cancel-1")); err != nil {
			t.Fatalf("cancel of the declined intent: %v", err)
		}
		st, body := e.browserConfirm(t, pi.ID, pi.ClientSecret, "pm_card_visa")
		if errBody, _ := body["error"].(map[string]any); st != http.StatusBadRequest || errBody["code"] != "payment_intent_unexpected_state" {
			t.Fatalf("confirm of a canceled intent = %d %v, want 400 payment_intent_unexpected_state", st, body)
		}
		if s := e.sim.StatsFor(keyA); s.Authorizations != 0 || s.Cancels != 1 {
			t.Fatalf("stats = %+v, want 0 authorizations and 1 cancel", s)
		}
	})
}
