package api_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// asyncEnv is a webhook account whose simulator sends its signed events to
// the service, as Stripe would.
type asyncEnv struct{ *webhookEnv }

func newAsyncEnv(t *testing.T) asyncEnv {
	t.Helper()
	w := newWebhookEnv(t)
	w.Sim.RegisterWebhookEndpoint(w.stripeKey, w.URL+"/webhooks/stripe/"+w.acctID, w.secret)
	return asyncEnv{w}
}

// hooks waits until the simulator has delivered every queued event.
func (w asyncEnv) hooks(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), apitest.WaitTimeout)
	defer cancel()
	if err := w.Sim.WaitWebhooks(ctx); err != nil {
		t.Fatalf("webhooks not delivered: %v", err)
	}
}

func (w asyncEnv) get(t *testing.T, id string) map[string]any {
	t.Helper()
	r := w.api(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id})
	wantStatus(t, r, http.StatusOK)
	return r.JSON(t)
}

// eventTypes lists the types of the account's events about one payment.
func (w asyncEnv) eventTypes(t *testing.T, id string) []string {
	t.Helper()
	w.FeedCaughtUp(t)
	r := w.api(apitest.Request{Method: http.MethodGet, Path: "/v1/events?limit=100"})
	wantStatus(t, r, http.StatusOK)
	var out []string
	for _, e := range r.JSON(t)["data"].([]any) {
		ev := e.(map[string]any)
		if ev["payment"].(map[string]any)["id"] == id {
			out = append(out, ev["type"].(string))
		}
	}
	return out
}

func (w asyncEnv) transition(t *testing.T, verb, intentID string) {
	t.Helper()
	var err error
	switch verb {
	case "pay":
		_, err = w.Sim.Pay(intentID)
	case "fail":
		_, err = w.Sim.Fail(intentID)
	case "expire":
		_, err = w.Sim.Expire(intentID)
	case "processing":
		_, err = w.Sim.MarkProcessing(intentID)
	}
	if err != nil {
		t.Fatalf("simulator %s: %v", verb, err)
	}
}

func (w asyncEnv) intent(t *testing.T, id string) providersim.Intent {
	t.Helper()
	for _, in := range w.Sim.Intents(w.stripeKey) {
		if in.ID == id {
			return in
		}
	}
	t.Fatalf("no intent %s at the simulator", id)
	return providersim.Intent{}
}

// requiresAction checks a create answered 201 requires_action with the
// next action of the given type and a client secret, and returns it.
func requiresAction(t *testing.T, r *apitest.Response, actionType string) map[string]any {
	t.Helper()
	wantStatus(t, r, http.StatusCreated)
	p := r.JSON(t)
	na, _ := p["next_action"].(map[string]any)
	if p["status"] != "requires_action" || na == nil || na["type"] != actionType || p["client_secret"] == nil {
		t.Fatalf("create = %s, want requires_action with %s", r.Body, actionType)
	}
	return p
}

func wantPayment(t *testing.T, p map[string]any, status, failureCode string) {
	t.Helper()
	fc, _ := p["failure_code"].(string)
	if p["status"] != status || fc != failureCode {
		t.Fatalf("payment status %v failure_code %v, want %s %q", p["status"], p["failure_code"], status, failureCode)
	}
	if na, has := p["next_action"]; !has || (na != nil && status != "requires_action") {
		t.Fatalf("payment %s: next_action %v, want null (and present)", status, na)
	}
}

func wantByteReplay(t *testing.T, first, again *apitest.Response) {
	t.Helper()
	if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry = %d %s, want the first answer replayed byte for byte", again.Status, again.Body)
	}
}

const threeDSBody = `{"order_id":"%s","amount":2000,"currency":"BRL","payment_method":"pm_card_threeDSecure2Required","return_url":"https://loja.example/retorno"}`

func bodyFor(format, order string) string { return strings.Replace(format, "%s", order, 1) }

func TestThreeDSecure(t *testing.T) {
	t.Parallel()
	t.Run("ApproveCaptures", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		first := w.create("k-3ds-ok", bodyFor(threeDSBody, "pedido-3ds-ok"))
		p := requiresAction(t, first, "redirect_to_url")
		redirect := p["next_action"].(map[string]any)["redirect_to_url"].(map[string]any)
		if redirect["return_url"] != "https://loja.example/retorno" || redirect["url"] == "" {
			t.Fatalf("redirect_to_url = %v", redirect)
		}
		wantByteReplay(t, first, w.create("k-3ds-ok", bodyFor(threeDSBody, "pedido-3ds-ok")))

		w.transition(t, "pay", p["provider_payment_id"].(string))
		w.hooks(t)
		got := w.get(t, p["id"].(string))
		wantPayment(t, got, "captured", "")
		if got["amount_captured"] != float64(2000) {
			t.Fatalf("amount_captured = %v", got["amount_captured"])
		}
		if st := w.Sim.StatsFor(w.stripeKey); st.Authorizations != 1 {
			t.Fatalf("authorizations at the provider = %d, want 1", st.Authorizations)
		}
		want := []string{"payment.processing", "payment.requires_action", "payment.captured"}
		if got := w.eventTypes(t, p["id"].(string)); !slices.Equal(got, want) {
			t.Fatalf("events = %v, want %v", got, want)
		}
		// A redelivery of every event changes nothing.
		for _, ev := range w.Sim.Events(w.stripeKey) {
			w.Sim.Redeliver(ev.ID)
		}
		w.hooks(t)
		if got := w.eventTypes(t, p["id"].(string)); !slices.Equal(got, want) {
			t.Fatalf("events after redelivery = %v, want %v", got, want)
		}
	})
	t.Run("FailDeclinesThenAttempt2", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		p := requiresAction(t, w.create("k-3ds-fail", bodyFor(threeDSBody, "pedido-3ds-fail")), "redirect_to_url")
		w.transition(t, "fail", p["provider_payment_id"].(string))
		w.hooks(t)
		wantPayment(t, w.get(t, p["id"].(string)), "declined", "authentication_failed")

		r := w.create("k-3ds-fail-2", bodyFor(threeDSBody, "pedido-3ds-fail"))
		p2 := requiresAction(t, r, "redirect_to_url")
		if p2["attempt"] != float64(2) {
			t.Fatalf("attempt = %v, want 2", p2["attempt"])
		}
		if in := w.intent(t, p2["provider_payment_id"].(string)); in.IdempotencyKey != "pedido-3ds-fail:autorizar-v2" {
			t.Fatalf("provider key = %q", in.IdempotencyKey)
		}
	})
	t.Run("WithoutReturnURLUsesStripeSDK", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		requiresAction(t, w.create("k-3ds-sdk", `{"order_id":"pedido-3ds-sdk","amount":2000,"currency":"BRL","payment_method":"pm_card_authenticationRequired"}`), "use_stripe_sdk")
	})
	t.Run("LiveForTheOrder", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		p := requiresAction(t, w.create("k-3ds-live", bodyFor(threeDSBody, "pedido-3ds-live")), "redirect_to_url")
		r := w.create("k-3ds-live-2", bodyFor(threeDSBody, "pedido-3ds-live"))
		wantProblem(t, r, http.StatusConflict, "order_has_active_payment")
		if r.JSON(t)["payment_id"] != p["id"] {
			t.Fatalf("payment_id = %v", r.JSON(t)["payment_id"])
		}
	})
}

const pixBody = `{"order_id":"%s","amount":5000,"currency":"BRL","payment_method":"pix","expires_in":600}`

func TestPix(t *testing.T) {
	t.Parallel()
	t.Run("PaidOnceWhateverTheWebhooks", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		first := w.create("k-pix", bodyFor(pixBody, "pedido-pix"))
		p := requiresAction(t, first, "pix_display_qr_code")
		qr := p["next_action"].(map[string]any)["pix_display_qr_code"].(map[string]any)
		if qr["data"] == "" || qr["image_url_png"] == "" {
			t.Fatalf("qr = %v", qr)
		}
		exp, err := time.Parse(time.RFC3339, qr["expires_at"].(string))
		if err != nil || exp.Sub(w.Clock.Now()) > 601*time.Second || exp.Sub(w.Clock.Now()) < 590*time.Second {
			t.Fatalf("expires_at = %v (%v), want in 600 s", qr["expires_at"], err)
		}
		wantByteReplay(t, first, w.create("k-pix", bodyFor(pixBody, "pedido-pix")))

		// Every event twice, the newest first.
		w.Sim.DuplicateWebhooks(true)
		w.Sim.HoldWebhooks()
		w.transition(t, "pay", p["provider_payment_id"].(string))
		w.Sim.ReleaseWebhooks(true)
		w.hooks(t)
		wantPayment(t, w.get(t, p["id"].(string)), "captured", "")
		want := []string{"payment.processing", "payment.requires_action", "payment.captured"}
		if got := w.eventTypes(t, p["id"].(string)); !slices.Equal(got, want) {
			t.Fatalf("events = %v, want %v", got, want)
		}
		if st := w.Sim.StatsFor(w.stripeKey); st.Authorizations != 1 {
			t.Fatalf("authorizations = %d, want 1", st.Authorizations)
		}
	})
	t.Run("ExpiryCancelsAtTheProvider", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		p := requiresAction(t, w.create("k-pix-exp", bodyFor(pixBody, "pedido-pix-exp")), "pix_display_qr_code")
		pi := p["provider_payment_id"].(string)
		// The create's own event first: arriving after the clock moves, it
		// would put the next poll a minute later.
		w.hooks(t)
		// Not due before its expiry: nothing is polled.
		if sum := runOnce(t, w.Env, nil); sum.Examined != 0 {
			t.Fatalf("summary before expiry = %+v", sum)
		}
		w.Clock.Advance(11 * time.Minute)
		runOnce(t, w.Env, nil)
		w.hooks(t)
		wantPayment(t, w.get(t, p["id"].(string)), "canceled", "action_expired")
		if in := w.intent(t, pi); in.Status != "canceled" {
			t.Fatalf("intent at the provider = %s, want canceled", in.Status)
		}
		if _, err := w.Sim.Pay(pi); err == nil {
			t.Fatal("the expired Pix could still be paid")
		}
		p2 := requiresAction(t, w.create("k-pix-exp-2", bodyFor(pixBody, "pedido-pix-exp")), "pix_display_qr_code")
		if p2["attempt"] != float64(2) {
			t.Fatalf("attempt = %v, want 2", p2["attempt"])
		}
	})
	t.Run("PaidWhileTheReconcilerExpiresIt", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		p := requiresAction(t, w.create("k-pix-race", bodyFor(pixBody, "pedido-pix-race")), "pix_display_qr_code")
		pi := p["provider_payment_id"].(string)
		// Paid ten seconds before expiry (the clock is real time plus an
		// offset, so a loaded machine eats into the margin); the event is late, and the
		// reconciler, past the expiry, tries to cancel.
		w.Sim.HoldWebhooks()
		w.Clock.Advance(590 * time.Second)
		w.transition(t, "pay", pi)
		w.Clock.Advance(2 * time.Minute)
		runOnce(t, w.Env, nil)
		w.Sim.ReleaseWebhooks(false)
		w.hooks(t)
		got := w.get(t, p["id"].(string))
		wantPayment(t, got, "captured", "")
		if in := w.intent(t, pi); in.Status != "succeeded" {
			t.Fatalf("intent at the provider = %s, want succeeded", in.Status)
		}
	})
	t.Run("LostResponseGivesTheSameQRCode", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		// Its events are late: only the retry can learn the outcome.
		w.Sim.HoldWebhooks()
		drop := w.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
		r := w.create("k-pix-lost", bodyFor(pixBody, "pedido-pix-lost"))
		drop.Remove()
		wantStatus(t, r, http.StatusAccepted)
		// The retry after the lease re-sends the same key: the provider
		// replays its intent.
		w.Clock.Advance(w.Opts.Lease + time.Second)
		again := w.create("k-pix-lost", bodyFor(pixBody, "pedido-pix-lost"))
		p := requiresAction(t, again, "pix_display_qr_code")
		wantByteReplay(t, again, w.create("k-pix-lost", bodyFor(pixBody, "pedido-pix-lost")))
		intents := w.Sim.Intents(w.stripeKey)
		if len(intents) != 1 || intents[0].ID != p["provider_payment_id"] {
			t.Fatalf("intents at the provider = %d, want 1", len(intents))
		}
		// The reconciler's view is the same QR code.
		runOnce(t, w.Env, nil)
		got := w.get(t, p["id"].(string))
		if got["next_action"].(map[string]any)["pix_display_qr_code"].(map[string]any)["data"] != p["next_action"].(map[string]any)["pix_display_qr_code"].(map[string]any)["data"] {
			t.Fatalf("QR code changed: %v", got["next_action"])
		}
	})
	t.Run("TimeoutResolvedByTheReconciler", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		w.Sim.HoldWebhooks()
		drop := w.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
		r := w.create("k-pix-rec", bodyFor(pixBody, "pedido-pix-rec"))
		drop.Remove()
		wantStatus(t, r, http.StatusAccepted)
		w.Clock.Advance(w.Opts.Lease + time.Second)
		sum := runOnce(t, w.Env, nil)
		if sum.Resolved["requires_action"] != 1 {
			t.Fatalf("summary = %+v, want one resolved into requires_action", sum)
		}
		again := w.create("k-pix-rec", bodyFor(pixBody, "pedido-pix-rec"))
		p := requiresAction(t, again, "pix_display_qr_code")
		if n := len(w.Sim.Intents(w.stripeKey)); n != 1 {
			t.Fatalf("intents = %d, want 1", n)
		}
		wantByteReplay(t, again, w.create("k-pix-rec", bodyFor(pixBody, "pedido-pix-rec")))
		// The late events change nothing.
		w.Sim.ReleaseWebhooks(false)
		w.hooks(t)
		if got := w.get(t, p["id"].(string)); got["status"] != "requires_action" {
			t.Fatalf("status = %v", got["status"])
		}
	})
	t.Run("WebhookResolvesTheLostResponse", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		// The answer is lost but the provider's requires_action event
		// arrives while the request is still recording: the client gets
		// the QR code at once.
		drop := w.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
		w.Sim.HoldWebhooks()
		r := w.create("k-pix-wh", bodyFor(pixBody, "pedido-pix-wh"))
		drop.Remove()
		wantStatus(t, r, http.StatusAccepted)
		w.Sim.ReleaseWebhooks(false)
		w.hooks(t)
		again := w.create("k-pix-wh", bodyFor(pixBody, "pedido-pix-wh"))
		requiresAction(t, again, "pix_display_qr_code")
		if n := len(w.Sim.Intents(w.stripeKey)); n != 1 {
			t.Fatalf("intents = %d, want 1", n)
		}
	})
}

const boletoBody = `{"order_id":"%s","amount":15000,"currency":"BRL","payment_method":"boleto","expires_in":3,` +
	`"billing_details":{"name":"Ana Souza","email":"ana@example.com","tax_id":"529.982.247-25",` +
	`"address":{"line1":"Av. Paulista, 1000","city":"São Paulo","state":"SP","postal_code":"01310-100","country":"BR"}}}`

func TestBoleto(t *testing.T) {
	t.Parallel()
	t.Run("PendingForDaysThenPaid", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		p := requiresAction(t, w.create("k-bol", bodyFor(boletoBody, "pedido-bol")), "boleto_display_details")
		pi := p["provider_payment_id"].(string)
		w.transition(t, "processing", pi)
		w.hooks(t)
		wantPayment(t, w.get(t, p["id"].(string)), "pending", "")
		// Days go by: polled, still pending, never expired.
		for range 5 {
			w.Clock.Advance(24 * time.Hour)
			runOnce(t, w.Env, nil)
		}
		wantPayment(t, w.get(t, p["id"].(string)), "pending", "")
		// Polled by retrieve only: the confirm was sent once.
		if keys := opRequests(w.Sim, "authorize"); len(keys) != 1 {
			t.Fatalf("authorize requests = %v, want 1", keys)
		}
		if n := len(opRequests(w.Sim, "retrieve")); n == 0 {
			t.Fatal("the pending payment was never polled")
		}
		w.transition(t, "pay", pi)
		w.hooks(t)
		wantPayment(t, w.get(t, p["id"].(string)), "captured", "")
		want := []string{"payment.processing", "payment.requires_action", "payment.pending", "payment.captured"}
		if got := w.eventTypes(t, p["id"].(string)); !slices.Equal(got, want) {
			t.Fatalf("events = %v, want %v", got, want)
		}
	})
	t.Run("InvalidCPF", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		r := w.create("k-bol-cpf", strings.Replace(bodyFor(boletoBody, "pedido-bol-cpf"), "247-25", "247-24", 1))
		wantProblem(t, r, http.StatusBadRequest, "invalid_request")
		if !strings.Contains(string(r.Body), "billing_details.tax_id") {
			t.Fatalf("problem = %s, want the field named", r.Body)
		}
		list := w.api(apitest.Request{Method: http.MethodGet, Path: "/v1/payments?order_id=pedido-bol-cpf"})
		wantStatus(t, list, http.StatusOK)
		if n := len(list.JSON(t)["data"].([]any)); n != 0 {
			t.Fatalf("payments stored = %d", n)
		}
		if n := w.PaymentCalls(); n != 0 {
			t.Fatalf("provider requests = %d", n)
		}
	})
}

func TestCancelRequiresAction(t *testing.T) {
	t.Parallel()
	t.Run("Canceled", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		p := requiresAction(t, w.create("k-cx", bodyFor(pixBody, "pedido-cx")), "pix_display_qr_code")
		r := w.api(cancelRequest(p["id"].(string), "k-cx-cancel"))
		wantStatus(t, r, http.StatusOK)
		wantPayment(t, r.JSON(t), "canceled", "")
		if in := w.intent(t, p["provider_payment_id"].(string)); in.Status != "canceled" {
			t.Fatalf("intent = %s", in.Status)
		}
	})
	t.Run("CustomerPaidFirst", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		p := requiresAction(t, w.create("k-cxp", bodyFor(pixBody, "pedido-cxp")), "pix_display_qr_code")
		// Paid at the provider; its event has not arrived when the cancel
		// is asked for.
		w.Sim.HoldWebhooks()
		w.transition(t, "pay", p["provider_payment_id"].(string))
		r := w.api(cancelRequest(p["id"].(string), "k-cxp-cancel"))
		wantProblem(t, r, http.StatusConflict, "invalid_state")
		wantPayment(t, w.get(t, p["id"].(string)), "captured", "")
		w.Sim.ReleaseWebhooks(false)
		w.hooks(t)
		wantPayment(t, w.get(t, p["id"].(string)), "captured", "")
		if in := w.intent(t, p["provider_payment_id"].(string)); in.Status != "succeeded" {
			t.Fatalf("intent = %s", in.Status)
		}
		again := w.api(cancelRequest(p["id"].(string), "k-cxp-cancel"))
		wantProblem(t, again, http.StatusConflict, "invalid_state")
		if again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatal("the refused cancel was not replayed")
		}
		if st := w.Sim.StatsFor(w.stripeKey); st.Cancels != 0 || st.Authorizations != 1 {
			t.Fatalf("provider stats = %+v, want one payment and no cancel", st)
		}
	})
}
