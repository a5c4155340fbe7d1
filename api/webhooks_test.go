package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/reconcile"
	"github.com/stripe/stripe-go/v76/webhook"
)

// webhookEnv is an Env with a second account that has a webhook secret (the
// harness's own account has none); every API call of a webhook test is made
// as that account.
type webhookEnv struct {
	*apitest.Env
	acctID    string
	apiKey    string
	stripeKey string
	secret    string
}

func newWebhookEnv(t *testing.T) *webhookEnv {
	t.Helper()
	return newWebhookEnvWith(t, apitest.Options{})
}

func newWebhookEnvWith(t *testing.T, opts apitest.Options) *webhookEnv {
	t.Helper()
	e := apitest.New(t, opts)
	w := &webhookEnv{Env: e, stripeKey: "sk_test_wh_" + apitest.SecretSuffix(t),
		secret: "whsec_" + apitest.SecretSuffix(t)}
	a, key, err := e.Accounts.Create(context.Background(), "Loja Webhook", w.stripeKey, w.secret)
	if err != nil {
		t.Fatalf("create account: %v", err)
	}
	w.acctID, w.apiKey = a.ID, key
	return w
}

// api calls the API as the webhook account.
func (w *webhookEnv) api(r apitest.Request) *apitest.Response {
	w.T.Helper()
	r.Bearer = w.apiKey
	return w.Do(r)
}

func (w *webhookEnv) create(key, body string) *apitest.Response {
	w.T.Helper()
	return w.api(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: body})
}

// authorized creates a manual-capture payment the provider authorized and
// returns its id and provider id.
func (w *webhookEnv) authorized(t *testing.T, order string) (id, pi string) {
	t.Helper()
	r := w.create("k-"+order, createBody(order, 2000))
	wantStatus(t, r, http.StatusCreated)
	p := r.JSON(t)
	if p["status"] != "authorized" {
		t.Fatalf("status = %v, want authorized", p["status"])
	}
	return p["id"].(string), p["provider_payment_id"].(string)
}

// unknown creates a payment whose authorization took effect at the provider
// while its answer was lost (202 unknown), and returns the payment and the
// provider's intent for it.
func (w *webhookEnv) unknown(t *testing.T, key, body string) (map[string]any, providersim.Intent) {
	t.Helper()
	// Two drops: Go's transport silently re-sends a POST carrying an
	// Idempotency-Key once on a reused connection.
	drop := w.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
	r := w.create(key, body)
	drop.Remove()
	wantStatus(t, r, http.StatusAccepted)
	p := r.JSON(t)
	if p["status"] != "unknown" {
		t.Fatalf("status = %v, want unknown; body %s", p["status"], r.Body)
	}
	return p, w.intentOf(t, p["id"].(string))
}

// intentOf finds the simulator's PaymentIntent of a payment.
func (w *webhookEnv) intentOf(t *testing.T, paymentID string) providersim.Intent {
	t.Helper()
	for _, in := range w.Sim.Intents(w.stripeKey) {
		if in.Metadata["payment_id"] == paymentID {
			return in
		}
	}
	t.Fatalf("the provider holds no intent for %s", paymentID)
	return providersim.Intent{}
}

func (w *webhookEnv) payment(t *testing.T, id string) map[string]any {
	t.Helper()
	r := w.api(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id})
	wantStatus(t, r, http.StatusOK)
	return r.JSON(t)
}

func (w *webhookEnv) wantPaymentStatus(t *testing.T, id, want string) map[string]any {
	t.Helper()
	p := w.payment(t, id)
	if p["status"] != want {
		t.Fatalf("payment %s status = %v, want %s", id, p["status"], want)
	}
	return p
}

// post sends a webhook request with the given Stripe-Signature ("" sends
// none) to an account's endpoint.
func (w *webhookEnv) post(acctID string, payload []byte, sig string) *apitest.Response {
	w.T.Helper()
	r := apitest.Request{Method: http.MethodPost, Path: "/webhooks/stripe/" + acctID, Body: string(payload), Bearer: "-"}
	if sig != "" {
		r.Headers = map[string]string{"Stripe-Signature": sig}
	}
	return w.Do(r)
}

func signWebhook(payload []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at}).Header
}

// deliver sends an event signed now with the account's secret, as Stripe
// does on every delivery and redelivery, and returns the 200's outcome.
func (w *webhookEnv) deliver(t *testing.T, payload []byte) string {
	t.Helper()
	r := w.post(w.acctID, payload, signWebhook(payload, w.secret, time.Now()))
	wantStatus(t, r, http.StatusOK)
	body := r.JSON(t)
	if body["received"] != true {
		t.Fatalf("webhook answer %s, want received true", r.Body)
	}
	outcome, _ := body["outcome"].(string)
	return outcome
}

func wantOutcome(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("webhook outcome = %q, want %q", got, want)
	}
}

func countDeliveries(t *testing.T, e *apitest.Env) int {
	t.Helper()
	var n int
	if err := e.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_deliveries`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// intentFields is the part of a PaymentIntent an event carries that the service reads.
type intentFields struct {
	id, status, captureMethod, paymentID string
	amount                               int64
	// attempt is the metadata the service sets on the intent of its n-th
	// authorization attempt; "" is "1".
	attempt string
}

// intentEvent renders a Stripe event about a PaymentIntent.
func intentEvent(eventID, eventType string, in intentFields) []byte {
	obj := map[string]any{
		"id": in.id, "object": "payment_intent", "status": in.status, "amount": in.amount,
		"amount_capturable": 0, "amount_received": 0, "currency": "brl", "capture_method": in.captureMethod,
		"metadata": map[string]string{"payment_id": in.paymentID, "attempt": in.attempt},
	}
	if in.attempt == "" {
		obj["metadata"].(map[string]string)["attempt"] = "1"
	}
	switch in.status {
	case "succeeded":
		obj["amount_received"] = in.amount
	case "requires_capture":
		obj["amount_capturable"] = in.amount
	case "requires_payment_method":
		obj["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined",
			"decline_code": "generic_decline", "message": "Your card was declined."}
	}
	b, err := json.Marshal(map[string]any{
		"id": eventID, "object": "event", "type": eventType, "api_version": "2023-10-16",
		"created": time.Now().Unix(), "livemode": false, "data": map[string]any{"object": obj},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// Event types and the intent state each carries.
func piSucceeded(id, paymentID, captureMethod string) []byte {
	return intentEvent("evt_"+id, "payment_intent.succeeded", intentFields{id: id, status: "succeeded",
		captureMethod: captureMethod, paymentID: paymentID, amount: 2000})
}

func piCapturable(id, paymentID string) []byte {
	return intentEvent("evt_cap_"+id, "payment_intent.amount_capturable_updated", intentFields{id: id,
		status: "requires_capture", captureMethod: "manual", paymentID: paymentID, amount: 2000})
}

func TestWebhookSignature(t *testing.T) {
	t.Parallel()

	// Each case posts an event that would capture an authorized payment;
	// a rejected one answers 400 invalid_request, stores no delivery and
	// leaves the payment authorized.
	rejected := func(t *testing.T, w *webhookEnv, id string, r *apitest.Response) {
		t.Helper()
		wantStatus(t, r, http.StatusBadRequest)
		if r.Code(t) != "invalid_request" {
			t.Fatalf("code = %q, want invalid_request", r.Code(t))
		}
		if n := countDeliveries(t, w.Env); n != 0 {
			t.Fatalf("%d deliveries stored, want none", n)
		}
		w.wantPaymentStatus(t, id, "authorized")
	}

	t.Run("ValidIsApplied", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-sig")
		wantOutcome(t, w.deliver(t, piSucceeded(piID, id, "manual")), "applied")
		p := w.wantPaymentStatus(t, id, "captured")
		if p["amount_captured"] != float64(2000) {
			t.Fatalf("amount_captured = %v, want 2000", p["amount_captured"])
		}
		if n := countDeliveries(t, w.Env); n != 1 {
			t.Fatalf("%d deliveries stored, want 1", n)
		}
	})

	t.Run("TamperedBody", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-sig")
		payload := piSucceeded(piID, id, "manual")
		sig := signWebhook(payload, w.secret, time.Now())
		tampered := []byte(strings.Replace(string(payload), `"amount":2000`, `"amount":2001`, 1))
		if string(tampered) == string(payload) {
			t.Fatalf("the payload was not changed")
		}
		rejected(t, w, id, w.post(w.acctID, tampered, sig))
	})

	t.Run("StaleTimestamp", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-sig")
		payload := piSucceeded(piID, id, "manual")
		// Well past the 300s default tolerance, whatever the test's speed.
		rejected(t, w, id, w.post(w.acctID, payload, signWebhook(payload, w.secret, time.Now().Add(-10*time.Minute))))
	})

	t.Run("WrongSecret", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-sig")
		payload := piSucceeded(piID, id, "manual")
		rejected(t, w, id, w.post(w.acctID, payload, signWebhook(payload, "whsec_someone_else", time.Now())))
	})

	t.Run("MissingHeader", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-sig")
		rejected(t, w, id, w.post(w.acctID, piSucceeded(piID, id, "manual"), ""))
	})

	t.Run("MalformedHeader", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-sig")
		rejected(t, w, id, w.post(w.acctID, piSucceeded(piID, id, "manual"), "garbage"))
	})

	t.Run("OversizedBody", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, _ := w.authorized(t, "pedido-sig")
		payload := []byte(`{"id":"evt_big","object":"event","type":"customer.updated","pad":"` + strings.Repeat("x", 1<<20) + `"}`)
		r := w.post(w.acctID, payload, signWebhook(payload, w.secret, time.Now()))
		if r.Status != http.StatusRequestEntityTooLarge || r.Code(t) != "request_too_large" {
			t.Fatalf("got %d %s, want 413 request_too_large", r.Status, r.Body)
		}
		if n := countDeliveries(t, w.Env); n != 0 {
			t.Fatalf("%d deliveries stored, want none", n)
		}
		w.wantPaymentStatus(t, id, "authorized")
	})

	t.Run("UnknownAccount", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-sig")
		payload := piSucceeded(piID, id, "manual")
		rejected(t, w, id, w.post("acct_does_not_exist", payload, signWebhook(payload, w.secret, time.Now())))
	})

	t.Run("AccountWithoutWebhookSecret", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-sig")
		payload := piSucceeded(piID, id, "manual")
		// The harness's own account has no webhook secret: even an event
		// signed with the empty secret is refused.
		rejected(t, w, id, w.post(w.Account.ID, payload, signWebhook(payload, "", time.Now())))
	})

	t.Run("AnotherAccountsSecret", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-sig")
		other, _, err := w.Accounts.Create(context.Background(), "Outra Loja", "sk_test_other_"+apitest.SecretSuffix(t), "whsec_other")
		if err != nil {
			t.Fatal(err)
		}
		payload := piSucceeded(piID, id, "manual")
		// Signed for the other account but sent to this one's endpoint.
		rejected(t, w, id, w.post(w.acctID, payload, signWebhook(payload, "whsec_other", time.Now())))
		// Sent to the other account's endpoint, it is verified there, but
		// the payment is not the other account's to change.
		wantStatus(t, w.post(other.ID, payload, signWebhook(payload, "whsec_other", time.Now())), http.StatusOK)
		w.wantPaymentStatus(t, id, "authorized")
	})
}

func TestWebhookDeduplication(t *testing.T) {
	t.Parallel()

	t.Run("RedeliveryChangesNothing", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-dup")
		payload := piSucceeded(piID, id, "manual")
		wantOutcome(t, w.deliver(t, payload), "applied")
		before := w.payment(t, id)
		wantOutcome(t, w.deliver(t, payload), "duplicate")
		after := w.wantPaymentStatus(t, id, "captured")
		if before["updated_at"] != after["updated_at"] {
			t.Fatalf("the redelivery touched the payment: %v then %v", before["updated_at"], after["updated_at"])
		}
		wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id), "payment.processing", "payment.authorized", "payment.captured")
		if n := countDeliveries(t, w.Env); n != 1 {
			t.Fatalf("%d deliveries stored, want 1", n)
		}
		if n := auditActions(t, w.Env, id, "webhook.payment_intent.succeeded"); n != 1 {
			t.Fatalf("%d webhook transitions in the audit trail, want 1", n)
		}
	})

	t.Run("TwoEventsForOneChangeApplyOnce", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-two")
		wantOutcome(t, w.deliver(t, intentEvent("evt_a", "payment_intent.succeeded",
			intentFields{id: piID, status: "succeeded", captureMethod: "manual", paymentID: id, amount: 2000})), "applied")
		wantOutcome(t, w.deliver(t, intentEvent("evt_b", "payment_intent.succeeded",
			intentFields{id: piID, status: "succeeded", captureMethod: "manual", paymentID: id, amount: 2000})), "ignored")
		w.wantPaymentStatus(t, id, "captured")
		wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id), "payment.processing", "payment.authorized", "payment.captured")
		if n := countDeliveries(t, w.Env); n != 2 {
			t.Fatalf("%d deliveries stored, want 2 (both are recognized on redelivery)", n)
		}
	})

	t.Run("ConcurrentRedeliveriesApplyOnce", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-conc")
		payload := piSucceeded(piID, id, "manual")
		const n = 10
		outcomes := make(chan string, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := w.TryDo(apitest.Request{Method: http.MethodPost, Path: "/webhooks/stripe/" + w.acctID,
					Body: string(payload), Bearer: "-", Headers: map[string]string{"Stripe-Signature": signWebhook(payload, w.secret, time.Now())}})
				if err != nil {
					t.Error(err)
					return
				}
				var body struct{ Outcome string }
				if r.Status != http.StatusOK || json.Unmarshal(r.Body, &body) != nil {
					t.Errorf("webhook answered %d %s, want 200", r.Status, r.Body)
					return
				}
				outcomes <- body.Outcome
			}()
		}
		close(start)
		apitest.Wait(t, &wg, "the redeliveries")
		close(outcomes)
		got := map[string]int{}
		for o := range outcomes {
			got[o]++
		}
		if got["applied"] != 1 || got["duplicate"] != n-1 {
			t.Fatalf("outcomes = %v, want 1 applied and %d duplicate", got, n-1)
		}
		wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id), "payment.processing", "payment.authorized", "payment.captured")
	})

	t.Run("UnknownObjectIsRecordedAndDeduplicated", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		payload := intentEvent("evt_stranger", "payment_intent.succeeded",
			intentFields{id: "pi_not_ours", status: "succeeded", captureMethod: "automatic", paymentID: "pay_not_ours", amount: 2000})
		wantOutcome(t, w.deliver(t, payload), "unknown_object")
		wantOutcome(t, w.deliver(t, payload), "duplicate")
		if n := countDeliveries(t, w.Env); n != 1 {
			t.Fatalf("%d deliveries stored, want 1", n)
		}
	})

	t.Run("UnhandledTypeIsIgnored", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		payload := []byte(`{"id":"evt_cus","object":"event","type":"customer.created","data":{"object":{"id":"cus_1","object":"customer"}}}`)
		wantOutcome(t, w.deliver(t, payload), "ignored")
		wantOutcome(t, w.deliver(t, payload), "duplicate")
	})
}

func TestWebhookOutOfOrder(t *testing.T) {
	t.Parallel()

	// Each case captures an authorized manual-capture payment by webhook,
	// then delivers a late or contradictory event: the payment stays
	// captured and the feed shows one capture.
	for _, tc := range []struct {
		name string
		late func(piID, id string) []byte
	}{
		{"LateAmountCapturableUpdated", func(piID, id string) []byte { return piCapturable(piID, id) }},
		{"PaymentFailedAfterSucceeded", func(piID, id string) []byte {
			return intentEvent("evt_failed", "payment_intent.payment_failed",
				intentFields{id: piID, status: "requires_payment_method", captureMethod: "manual", paymentID: id, amount: 2000})
		}},
		{"CanceledOnCaptured", func(piID, id string) []byte {
			return intentEvent("evt_canceled", "payment_intent.canceled",
				intentFields{id: piID, status: "canceled", captureMethod: "manual", paymentID: id, amount: 2000})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWebhookEnv(t)
			id, piID := w.authorized(t, "pedido-ooo")
			wantOutcome(t, w.deliver(t, piSucceeded(piID, id, "manual")), "applied")
			wantOutcome(t, w.deliver(t, tc.late(piID, id)), "ignored")
			p := w.wantPaymentStatus(t, id, "captured")
			if p["amount_captured"] != float64(2000) || p["failure_code"] != nil {
				t.Fatalf("the late event changed the payment: %v", p)
			}
			wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id), "payment.processing", "payment.authorized", "payment.captured")
		})
	}

	t.Run("ConcurrentEventsForOneUnknownPayment", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		p, in := w.unknown(t, "k-both", createBody("pedido-both", 2000))
		id := p["id"].(string)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, payload := range [][]byte{piCapturable(in.ID, id), piSucceeded(in.ID, id, "manual")} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := w.TryDo(apitest.Request{Method: http.MethodPost, Path: "/webhooks/stripe/" + w.acctID,
					Body: string(payload), Bearer: "-", Headers: map[string]string{"Stripe-Signature": signWebhook(payload, w.secret, time.Now())}})
				if err != nil {
					t.Error(err)
				} else if r.Status != http.StatusOK {
					t.Errorf("webhook answered %d %s, want 200", r.Status, r.Body)
				}
			}()
		}
		close(start)
		apitest.Wait(t, &wg, "the two deliveries")
		w.wantPaymentStatus(t, id, "captured")
		evs := paymentEvents(t, w.Env, w.apiKey, id)
		if last := evs[len(evs)-1]; last.Type != "payment.captured" || len(evs) > 4 {
			t.Fatalf("events %v, want processing, unknown, maybe authorized, then captured", evs)
		}
	})

	t.Run("UnknownPaymentCapturedBeforeCapturable", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		p, in := w.unknown(t, "k-ooo", createBody("pedido-ooo", 2000))
		id := p["id"].(string)
		wantOutcome(t, w.deliver(t, piSucceeded(in.ID, id, "manual")), "applied")
		wantOutcome(t, w.deliver(t, piCapturable(in.ID, id)), "ignored")
		w.wantPaymentStatus(t, id, "captured")
		wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id), "payment.processing", "payment.unknown", "payment.captured")
	})
}

func TestWebhookResolvesUnknown(t *testing.T) {
	t.Parallel()

	t.Run("ManualCaptureBecomesAuthorizedAndTheKeyReplays", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		body := createBody("pedido-wh", 2000)
		p, in := w.unknown(t, "k-wh", body)
		id := p["id"].(string)
		if in.Status != "requires_capture" {
			t.Fatalf("the provider's intent is %s, want requires_capture", in.Status)
		}
		wantEffects(t, w.Sim, 1)
		sent := len(w.Sim.Requests())

		wantOutcome(t, w.deliver(t, piCapturable(in.ID, id)), "applied")
		got := w.wantPaymentStatus(t, id, "authorized")
		if got["provider_payment_id"] != in.ID {
			t.Fatalf("provider_payment_id = %v, want %s", got["provider_payment_id"], in.ID)
		}

		retry := w.create("k-wh", body)
		wantStatus(t, retry, http.StatusCreated)
		if retry.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the retry was not a replay")
		}
		rp := retry.JSON(t)
		if rp["id"] != id || rp["status"] != "authorized" || rp["provider_payment_id"] != in.ID {
			t.Fatalf("replayed payment = %s", retry.Body)
		}
		if n := len(w.Sim.Requests()); n != sent {
			t.Fatalf("the provider got %d more requests, want none", n-sent)
		}
		wantEffects(t, w.Sim, 1)
		wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id), "payment.processing", "payment.unknown", "payment.authorized")
	})

	t.Run("AutomaticCaptureSucceededBecomesCaptured", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		body := `{"order_id":"pedido-auto","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`
		p, in := w.unknown(t, "k-auto", body)
		id := p["id"].(string)
		if in.Status != "succeeded" {
			t.Fatalf("the provider's intent is %s, want succeeded", in.Status)
		}
		wantOutcome(t, w.deliver(t, piSucceeded(in.ID, id, "automatic")), "applied")
		got := w.wantPaymentStatus(t, id, "captured")
		if got["amount_captured"] != float64(2000) {
			t.Fatalf("amount_captured = %v, want 2000", got["amount_captured"])
		}
		retry := w.create("k-auto", body)
		wantStatus(t, retry, http.StatusCreated)
		if retry.Header.Get("Idempotent-Replayed") != "true" || retry.JSON(t)["status"] != "captured" {
			t.Fatalf("retry = %d %s, want the replayed captured payment", retry.Status, retry.Body)
		}
		wantEffects(t, w.Sim, 1)
		wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id), "payment.processing", "payment.unknown", "payment.captured")
	})

	t.Run("PaymentFailedBecomesDeclined", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		body := createBody("pedido-dec", 2000)
		p, in := w.unknown(t, "k-dec", body)
		id := p["id"].(string)
		wantOutcome(t, w.deliver(t, intentEvent("evt_dec", "payment_intent.payment_failed",
			intentFields{id: in.ID, status: "requires_payment_method", captureMethod: "manual", paymentID: id, amount: 2000})), "applied")
		got := w.wantPaymentStatus(t, id, "declined")
		if got["failure_code"] != "generic_decline" {
			t.Fatalf("failure_code = %v, want generic_decline", got["failure_code"])
		}
		retry := w.create("k-dec", body)
		wantStatus(t, retry, http.StatusCreated)
		if retry.Header.Get("Idempotent-Replayed") != "true" || retry.JSON(t)["status"] != "declined" {
			t.Fatalf("retry = %d %s, want the replayed declined payment", retry.Status, retry.Body)
		}
	})

	t.Run("RacingTheReconcilerAndTheClientResolvesOnce", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		const n = 5
		type unknownPayment struct {
			id, key, body string
			in            providersim.Intent
		}
		var ps []unknownPayment
		for i := range n {
			order := fmt.Sprintf("pedido-race-%d", i)
			key, body := "k-"+order, createBody(order, 2000)
			p, in := w.unknown(t, key, body)
			ps = append(ps, unknownPayment{p["id"].(string), key, body, in})
		}
		wantEffects(t, w.Sim, n)

		rec, err := reconcile.New(reconcile.Config{Payments: w.Payments, Store: w.ReconcileStore(), Now: w.ServiceClock(), Accounts: w.Accounts, After: 0})
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := rec.RunOnce(context.Background()); err != nil {
					t.Errorf("RunOnce: %v", err)
				}
			}()
		}
		for _, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				payload := piCapturable(p.in.ID, p.id)
				r, err := w.TryDo(apitest.Request{Method: http.MethodPost, Path: "/webhooks/stripe/" + w.acctID,
					Body: string(payload), Bearer: "-", Headers: map[string]string{"Stripe-Signature": signWebhook(payload, w.secret, time.Now())}})
				if err != nil {
					t.Error(err)
					return
				}
				if r.Status != http.StatusOK {
					t.Errorf("webhook answered %d %s, want 200", r.Status, r.Body)
				}
			}()
			// The client retries at the same time: it recovers the same
			// attempt, or is told the key is in use.
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := w.TryDo(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: p.key, Body: p.body, Bearer: w.apiKey})
				if err != nil {
					t.Error(err)
					return
				}
				var got struct{ Status, Code string }
				_ = json.Unmarshal(r.Body, &got)
				if !(r.Status == http.StatusCreated && got.Status == "authorized") &&
					!(r.Status == http.StatusConflict && got.Code == "idempotency_key_in_use") {
					t.Errorf("client retry answered %d %s, want 201 authorized or 409 idempotency_key_in_use", r.Status, r.Body)
				}
			}()
		}
		close(start)
		apitest.Wait(t, &wg, "the reconcilers, webhooks and client retries")
		if t.Failed() {
			t.FailNow()
		}

		for _, p := range ps {
			w.wantPaymentStatus(t, p.id, "authorized")
			wantTypes(t, paymentEvents(t, w.Env, w.apiKey, p.id), "payment.processing", "payment.unknown", "payment.authorized")
			retry := w.create(p.key, p.body)
			wantStatus(t, retry, http.StatusCreated)
			if retry.Header.Get("Idempotent-Replayed") != "true" || retry.JSON(t)["status"] != "authorized" {
				t.Fatalf("retry = %s, want the replayed authorized payment", retry.Body)
			}
		}
		wantEffects(t, w.Sim, n)
	})
}

// auditActions counts a payment's audit entries with the given action.
func auditActions(t *testing.T, e *apitest.Env, paymentID, action string) int {
	t.Helper()
	var n int
	if err := e.DB.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM audit_log WHERE payment_id = $1 AND action = $2`, paymentID, action).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWebhookEarlierAttempt covers a payment an ops replay moved to a new
// attempt (a new intent at the provider): events about the earlier
// attempt's intent, which Stripe may still deliver or redeliver, say
// nothing about the current one.
func TestWebhookEarlierAttempt(t *testing.T) {
	t.Parallel()

	// declinedThenApprovable makes a payment whose first attempt was
	// declined, with the card approvable on the next attempt (the simulator
	// answers by payment method, so the test swaps it as an issuer would
	// change its mind). It returns the payment id and the first intent.
	declinedThenApprovable := func(t *testing.T, w *webhookEnv) (string, string) {
		t.Helper()
		r := w.create("k-re", `{"order_id":"pedido-re","amount":2000,"currency":"BRL","payment_method":"pm_card_chargeDeclined","capture_method":"manual"}`)
		wantStatus(t, r, http.StatusCreated)
		p := r.JSON(t)
		if p["status"] != "declined" {
			t.Fatalf("status = %v, want declined", p["status"])
		}
		id := p["id"].(string)
		if _, err := w.DB.Pool.Exec(context.Background(), `UPDATE payments SET payment_method = 'pm_card_visa' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		return id, w.intentOf(t, id).ID
	}
	replayAs := func(w *webhookEnv, id string) *apitest.Response {
		return w.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/payments/" + id + "/replay",
			Key: "replay-" + id, Bearer: apitest.AdminToken,
			Body: `{"actor":"ops@acmepay.dev","reason":"the issuer now approves the card"}`})
	}
	// secondIntent is the intent of attempt 2.
	secondIntent := func(t *testing.T, w *webhookEnv, id string) providersim.Intent {
		t.Helper()
		for _, in := range w.Sim.Intents(w.stripeKey) {
			if in.Metadata["payment_id"] == id && in.Metadata["attempt"] == "2" {
				return in
			}
		}
		t.Fatalf("no second intent for %s", id)
		return providersim.Intent{}
	}

	t.Run("DoesNotResolveTheCurrentAttempt", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, first := declinedThenApprovable(t, w)
		drop := w.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
		r := replayAs(w, id)
		drop.Remove()
		wantStatus(t, r, http.StatusCreated)
		if got := r.JSON(t)["status"]; got != "unknown" {
			t.Fatalf("replayed payment status = %v, want unknown", got)
		}
		second := secondIntent(t, w, id)
		if second.Status != "requires_capture" {
			t.Fatalf("attempt 2 at the provider is %s, want requires_capture", second.Status)
		}

		// Stripe redelivers the first attempt's failure.
		wantOutcome(t, w.deliver(t, intentEvent("evt_old_failed", "payment_intent.payment_failed",
			intentFields{id: first, status: "requires_payment_method", captureMethod: "manual", paymentID: id, amount: 2000})), "ignored")
		w.wantPaymentStatus(t, id, "unknown")

		wantOutcome(t, w.deliver(t, intentEvent("evt_new_capturable", "payment_intent.amount_capturable_updated",
			intentFields{id: second.ID, status: "requires_capture", captureMethod: "manual", paymentID: id, amount: 2000, attempt: "2"})), "applied")
		p := w.wantPaymentStatus(t, id, "authorized")
		if p["provider_payment_id"] != second.ID || p["attempt"] != float64(2) {
			t.Fatalf("payment %v, want attempt 2 on %s", p, second.ID)
		}
		retry := replayAs(w, id)
		wantStatus(t, retry, http.StatusCreated)
		if retry.Header.Get("Idempotent-Replayed") != "true" || retry.JSON(t)["status"] != "authorized" {
			t.Fatalf("replay retry = %d %s, want the replayed authorized payment", retry.Status, retry.Body)
		}
	})

	t.Run("DoesNotMoveTheSettledPayment", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, first := declinedThenApprovable(t, w)
		r := replayAs(w, id)
		wantStatus(t, r, http.StatusCreated)
		second := secondIntent(t, w, id)
		if p := r.JSON(t); p["status"] != "authorized" || p["provider_payment_id"] != second.ID {
			t.Fatalf("replay = %s, want authorized on %s", r.Body, second.ID)
		}

		// The first, declined intent is canceled at the provider.
		wantOutcome(t, w.deliver(t, intentEvent("evt_old_canceled", "payment_intent.canceled",
			intentFields{id: first, status: "canceled", captureMethod: "manual", paymentID: id, amount: 2000})), "ignored")
		p := w.wantPaymentStatus(t, id, "authorized")
		if p["provider_payment_id"] != second.ID {
			t.Fatalf("provider_payment_id = %v, want %s", p["provider_payment_id"], second.ID)
		}
		wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id),
			"payment.processing", "payment.declined", "payment.processing", "payment.authorized")
	})
}

func TestWebhookWhileRequestsAreInFlight(t *testing.T) {
	t.Parallel()

	t.Run("CreateAnsweredByTheWebhooksResolution", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		body := createBody("pedido-fly", 2000)
		hold := w.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldAfterEffect, Times: 1})
		answered := w.DoAsync(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-fly", Body: body, Bearer: w.apiKey})
		apitest.Recv(t, hold.Reached(), "the authorization to take effect at the provider")
		in := w.Sim.Intents(w.stripeKey)
		if len(in) != 1 {
			t.Fatalf("%d intents at the provider, want 1", len(in))
		}
		id := in[0].Metadata["payment_id"]
		w.wantPaymentStatus(t, id, "processing")
		// The provider's event overtakes its answer.
		wantOutcome(t, w.deliver(t, piCapturable(in[0].ID, id)), "applied")
		w.wantPaymentStatus(t, id, "authorized")
		hold.Release()
		r := apitest.Await(t, answered, "the held create's answer")
		wantStatus(t, r, http.StatusCreated)
		if p := r.JSON(t); p["id"] != id || p["status"] != "authorized" {
			t.Fatalf("answer %s, want the authorized payment", r.Body)
		}
		wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id), "payment.processing", "payment.authorized")
		retry := w.create("k-fly", body)
		if retry.Status != http.StatusCreated || retry.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry = %d %s, want the replayed 201", retry.Status, retry.Body)
		}
		wantEffects(t, w.Sim, 1)
	})

	t.Run("CaptureWhoseAnswerWasLost", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-cap")
		drop := w.Sim.Inject(providersim.Fault{Op: "capture", Kind: providersim.DropAfterEffect, Times: 2})
		r := w.api(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/capture", Key: "k-cap"})
		drop.Remove()
		wantStatus(t, r, http.StatusAccepted)
		wantOutcome(t, w.deliver(t, piSucceeded(piID, id, "manual")), "applied")
		w.wantPaymentStatus(t, id, "captured")
		retry := w.api(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/capture", Key: "k-cap"})
		wantStatus(t, retry, http.StatusOK)
		if p := retry.JSON(t); p["status"] != "captured" || p["amount_captured"] != float64(2000) {
			t.Fatalf("capture retry = %s, want the captured payment", retry.Body)
		}
		if n := w.Sim.Stats().Captures; n != 1 {
			t.Fatalf("captures at the provider = %d, want 1", n)
		}
		wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id), "payment.processing", "payment.authorized", "payment.captured")
	})
}

func TestWebhookChargeRefunded(t *testing.T) {
	t.Parallel()

	chargeRefunded := func(eventID, chargeID, piID string, refunded int64) []byte {
		return fmt.Appendf(nil, `{"id":%q,"object":"event","type":"charge.refunded","data":{"object":{"id":%q,"object":"charge",`+
			`"amount":2000,"amount_captured":2000,"amount_refunded":%d,"currency":"brl","payment_intent":%q,"refunded":%t}}}`,
			eventID, chargeID, refunded, piID, refunded == 2000)
	}
	captured := func(t *testing.T, w *webhookEnv) (id string, in providersim.Intent) {
		t.Helper()
		r := w.create("k-ref", `{"order_id":"pedido-ref","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`)
		wantStatus(t, r, http.StatusCreated)
		id = r.JSON(t)["id"].(string)
		return id, w.intentOf(t, id)
	}

	t.Run("ExternalRefundIsApplied", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, in := captured(t, w)
		payload := chargeRefunded("evt_ref_1", in.LatestCharge, in.ID, 500)
		wantOutcome(t, w.deliver(t, payload), "applied")
		wantOutcome(t, w.deliver(t, payload), "duplicate")
		wantOutcome(t, w.deliver(t, chargeRefunded("evt_ref_1b", in.LatestCharge, in.ID, 500)), "ignored")
		p := w.wantPaymentStatus(t, id, "captured")
		if p["amount_refunded"] != float64(500) {
			t.Fatalf("amount_refunded = %v, want 500", p["amount_refunded"])
		}
		wantTypes(t, paymentEvents(t, w.Env, w.apiKey, id), "payment.processing", "payment.captured", "payment.refunded")
	})

	t.Run("RefundMadeThroughTheAPIIsNotCountedTwice", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, in := captured(t, w)
		wantStatus(t, w.api(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/refunds", Key: "k-r1", Body: `{"amount":500}`}), http.StatusCreated)
		wantOutcome(t, w.deliver(t, chargeRefunded("evt_ref_api", in.LatestCharge, in.ID, 500)), "ignored")
		if p := w.payment(t, id); p["amount_refunded"] != float64(500) {
			t.Fatalf("amount_refunded = %v, want 500", p["amount_refunded"])
		}
	})

	t.Run("RefundWhoseAnswerWasLostIsNotCountedTwice", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, in := captured(t, w)
		drop := w.Sim.Inject(providersim.Fault{Op: "refund", Kind: providersim.DropAfterEffect, Times: 2})
		wantStatus(t, w.api(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/refunds", Key: "k-r1", Body: `{"amount":500}`}), http.StatusAccepted)
		drop.Remove()
		// The provider says 500 was refunded: the payment shows it at once,
		// and the refund's own resolution later does not add it again.
		wantOutcome(t, w.deliver(t, chargeRefunded("evt_ref_lost", in.LatestCharge, in.ID, 500)), "applied")
		if p := w.payment(t, id); p["amount_refunded"] != float64(500) {
			t.Fatalf("amount_refunded after the event = %v, want 500", p["amount_refunded"])
		}
		r := w.api(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/refunds", Key: "k-r1", Body: `{"amount":500}`})
		wantStatus(t, r, http.StatusCreated)
		if p := w.payment(t, id); p["amount_refunded"] != float64(500) {
			t.Fatalf("amount_refunded = %v, want 500", p["amount_refunded"])
		}
		if n := w.Sim.Stats().Refunds; n != 1 {
			t.Fatalf("refunds at the provider = %d, want 1", n)
		}
	})
}
