package api_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/provider/stripe"
)

// These tests hold the service to CONTRACT §5 and §6: what each provider
// answer proves about the first request, the re-send window, and lookups
// past it. The simulator forgets keys after the same retention as the
// service assumes, as Stripe does after 24 h.

const (
	// proofRetention leaves a re-send window of proofRetention minus the
	// margin: 3 s PROVIDER_TIMEOUT × 2 sends (no library retries in tests)
	// + 1 min clock skew = 66 s.
	proofRetention = 10 * time.Minute
	proofMargin    = 66 * time.Second
)

func proofEnv(t *testing.T, opts apitest.Options) *apitest.Env {
	t.Helper()
	if opts.KeyRetention == 0 {
		opts.KeyRetention = proofRetention
	}
	if opts.SearchGrace == 0 {
		opts.SearchGrace = 2 * time.Minute
	}
	return apitest.New(t, opts)
}

// dashboard acts on the merchant's provider account directly, as a person
// in the provider's dashboard would.
func dashboard(e *apitest.Env) (*stripe.Provider, provider.Credentials) {
	return stripe.New(stripe.Config{APIBase: e.SimURL}), provider.Credentials{SecretKey: e.Account.StripeSecret}
}

// deadlines records how much time each authorization call was given.
type deadlines struct {
	provider.Provider
	mu   sync.Mutex
	left []time.Duration
}

func (d *deadlines) Authorize(ctx context.Context, c provider.Credentials, r provider.AuthorizeRequest) provider.Result {
	if dl, ok := ctx.Deadline(); ok {
		d.mu.Lock()
		d.left = append(d.left, time.Until(dl))
		d.mu.Unlock()
	}
	return d.Provider.Authorize(ctx, c, r)
}

func (d *deadlines) last() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.left[len(d.left)-1]
}

func TestResendWindow(t *testing.T) {
	t.Parallel()

	t.Run("PastTheWindowTheKeyIsNeverSentAgain", func(t *testing.T) {
		t.Parallel()
		e := proofEnv(t, apitest.Options{})
		drop := dropAuthorize(e)
		p := createUnknown(t, e, "k-win-past", createBody("pedido-win-past", 2000))
		drop.Remove()
		sent := len(opRequests(e.Sim, "authorize"))
		// Still inside the provider's retention, but a re-send decided now
		// could reach it after the key is forgotten.
		e.Clock.Advance(proofRetention - proofMargin + time.Second)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
		if n := len(opRequests(e.Sim, "authorize")); n != sent {
			t.Fatalf("authorizations sent = %d, want %d: the key was re-sent past its window", n, sent)
		}
		if n := len(opRequests(e.Sim, "search")); n != 1 {
			t.Fatalf("searches = %d, want 1", n)
		}
		if got := getPaymentJSON(t, e, p["id"].(string)); got["status"] != "authorized" {
			t.Fatalf("payment = %v, want authorized from the lookup", got)
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("ClientRetryPastTheWindowLooksUpInsteadOfCharging", func(t *testing.T) {
		t.Parallel()
		e := proofEnv(t, apitest.Options{})
		drop := dropAuthorize(e)
		body := createBody("pedido-win-retry", 2000)
		createUnknown(t, e, "k-win-retry", body)
		drop.Remove()
		sent := len(opRequests(e.Sim, "authorize"))
		// Past the provider's retention itself: a re-send would charge again.
		e.Clock.Advance(proofRetention + time.Minute)
		r := create(e, "k-win-retry", body)
		wantStatus(t, r, http.StatusCreated)
		if got := r.JSON(t); got["status"] != "authorized" {
			t.Fatalf("retry = %s, want the authorization found at the provider", r.Body)
		}
		if n := len(opRequests(e.Sim, "authorize")); n != sent {
			t.Fatalf("authorizations sent = %d, want %d: the key was re-sent past its window", n, sent)
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("ResendNearTheEndIsCappedToTheWindow", func(t *testing.T) {
		t.Parallel()
		rec := &deadlines{}
		e := proofEnv(t, apitest.Options{WrapProvider: apitest.WrapStripe(func(p provider.Provider) provider.Provider {
			rec.Provider = p
			return rec
		})})
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
		p := createUnknown(t, e, "k-win-cap", createBody("pedido-win-cap", 2000))
		if first := rec.last(); first < 2*time.Second {
			t.Fatalf("first send had %v, want the full PROVIDER_TIMEOUT", first)
		}
		// One second of window left, three of PROVIDER_TIMEOUT.
		e.Clock.Advance(proofRetention - proofMargin - time.Second)
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
		if left := rec.last(); left > time.Second {
			t.Fatalf("re-send had %v, want at most the 1 s left in the window", left)
		}
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-win-cap:autorizar-v1", "pedido-win-cap:autorizar-v1")
		if got := getPaymentJSON(t, e, p["id"].(string)); got["status"] != "authorized" {
			t.Fatalf("payment = %v", got)
		}
		wantEffects(t, e.Sim, 1)
	})
}

func TestCredentialErrors(t *testing.T) {
	t.Parallel()

	t.Run("OnAFirstSendTheyFailThePayment", func(t *testing.T) {
		t.Parallel()
		e := proofEnv(t, apitest.Options{})
		e.Sim.RevokeSecret(e.Account.StripeSecret)
		r := create(e, "k-cred-first", createBody("pedido-cred-first", 2000))
		wantStatus(t, r, http.StatusCreated)
		if p := r.JSON(t); p["status"] != "failed" || p["failure_code"] != "provider_authentication" {
			t.Fatalf("payment = %s, want failed with provider_authentication", r.Body)
		}
		wantEffects(t, e.Sim, 0)
	})

	t.Run("OnARecoveryTheyProveNothing", func(t *testing.T) {
		t.Parallel()
		e := proofEnv(t, apitest.Options{})
		drop := dropAuthorize(e)
		body := createBody("pedido-cred-rec", 2000)
		p := createUnknown(t, e, "k-cred-rec", body)
		drop.Remove()
		id := p["id"].(string)
		e.Sim.RevokeSecret(e.Account.StripeSecret)

		// The client's retry after the lease takes over and re-sends: 401.
		e.Clock.Advance(time.Minute)
		wantStatus(t, create(e, "k-cred-rec", body), http.StatusAccepted)
		// The reconciler re-sends too: 401 again.
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{}, 1)
		if got := getPaymentJSON(t, e, id); got["status"] != "unknown" {
			t.Fatalf("payment = %v, want unknown: a 401 on a re-send says nothing about the first send", got)
		}
		// A new client key cannot start a second charge meanwhile.
		wantStatus(t, create(e, "k-cred-new", body), http.StatusConflict)

		e.Sim.RestoreSecret(e.Account.StripeSecret)
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
		if got := getPaymentJSON(t, e, id); got["status"] != "authorized" {
			t.Fatalf("payment = %v, want the first send's authorization", got)
		}
		wantEffects(t, e.Sim, 1)
	})
}

func TestPastTheWindowOperationsAreLookedUp(t *testing.T) {
	t.Parallel()

	t.Run("RefundFoundByItsID", func(t *testing.T) {
		t.Parallel()
		e := proofEnv(t, apitest.Options{})
		id := captured(t, e, "pedido-lr-found", 2000)
		drop := e.Sim.Inject(providersim.Fault{Op: "refund", Kind: providersim.DropAfterEffect, Times: 2})
		wantStatus(t, refund(e, id, "k-lr-found", 500), http.StatusAccepted)
		drop.Remove()
		e.Clock.Advance(proofRetention + time.Minute)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"refunded": 1}, 0)
		if got := getPaymentJSON(t, e, id); got["amount_refunded"] != float64(500) {
			t.Fatalf("payment = %v, want 500 refunded", got)
		}
		wantOnlyKey(t, opRequests(e.Sim, "refund"), "pedido-lr-found:estornar-v1")
		if n := len(opRequests(e.Sim, "list_refunds")); n != 1 {
			t.Fatalf("refund lists = %d, want 1", n)
		}
		if n := e.Sim.Stats().Refunds; n != 1 {
			t.Fatalf("refunds at the provider = %d, want 1", n)
		}
		again := refund(e, id, "k-lr-found", 500)
		wantStatus(t, again, http.StatusCreated)
		if r := again.JSON(t); r["status"] != "succeeded" {
			t.Fatalf("retry = %s, want the refund succeeded", again.Body)
		}
	})

	t.Run("RefundNeverMadeFailsAndFreesItsAmount", func(t *testing.T) {
		t.Parallel()
		e := proofEnv(t, apitest.Options{})
		id := captured(t, e, "pedido-lr-none", 2000)
		e.Sim.Inject(providersim.Fault{Op: "refund", Kind: providersim.Error500BeforeEffect, Times: 1})
		wantStatus(t, refund(e, id, "k-lr-none", 2000), http.StatusAccepted)
		// While unknown, the refund holds its amount.
		wantProblem(t, refund(e, id, "k-lr-more", 2000), http.StatusConflict, "refund_exceeds_captured")
		e.Clock.Advance(proofRetention + time.Minute)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"refund_failed": 1}, 0)
		wantKeys(t, opRequests(e.Sim, "refund"), "pedido-lr-none:estornar-v1")
		wantProblem(t, refund(e, id, "k-lr-none", 2000), http.StatusConflict, "provider_rejected")
		wantStatus(t, refund(e, id, "k-lr-after", 2000), http.StatusCreated)
		if n := e.Sim.Stats().Refunds; n != 1 {
			t.Fatalf("refunds at the provider = %d, want 1", n)
		}
	})

	t.Run("CaptureOfAnIntentCanceledMeanwhileFails", func(t *testing.T) {
		t.Parallel()
		e := proofEnv(t, apitest.Options{})
		id := authorized(t, e, "pedido-lc-cancel", 2000)
		e.Sim.Inject(providersim.Fault{Op: "capture", Kind: providersim.Error500BeforeEffect, Times: 1})
		wantStatus(t, capture(e, id, "k-lc-cancel", ""), http.StatusAccepted)
		prov, creds := dashboard(e)
		pi := getPaymentJSON(t, e, id)["provider_payment_id"].(string)
		if res := prov.Cancel(context.Background(), creds, provider.CancelRequest{IdempotencyKey: "dashboard-cancel", IntentID: pi}); res.Answer != provider.AnswerObject {
			t.Fatalf("dashboard cancel: %+v", res)
		}
		e.Clock.Advance(proofRetention + time.Minute)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"canceled": 1}, 0)
		wantKeys(t, opRequests(e.Sim, "capture"), "pedido-lc-cancel:capturar-v1")
		got := getPaymentJSON(t, e, id)
		if got["status"] != "canceled" || got["amount_captured"] != float64(0) {
			t.Fatalf("payment = %v, want canceled as the provider shows it", got)
		}
		r := capture(e, id, "k-lc-cancel", "")
		wantProblem(t, r, http.StatusConflict, "provider_rejected")
		if code := r.JSON(t)["provider_code"]; code != "no_effect_at_provider" {
			t.Fatalf("provider_code = %v", code)
		}
		if n := e.Sim.Stats().Captures; n != 0 {
			t.Fatalf("captures at the provider = %d, want 0", n)
		}
	})

	t.Run("CaptureMadeBeforeTheKeyWasForgottenSucceeds", func(t *testing.T) {
		t.Parallel()
		e := proofEnv(t, apitest.Options{})
		id := authorized(t, e, "pedido-lc-done", 2000)
		drop := e.Sim.Inject(providersim.Fault{Op: "capture", Kind: providersim.DropAfterEffect, Times: 2})
		wantStatus(t, capture(e, id, "k-lc-done", ""), http.StatusAccepted)
		drop.Remove()
		e.Clock.Advance(proofRetention + time.Minute)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"captured": 1}, 0)
		if got := getPaymentJSON(t, e, id); got["status"] != "captured" || got["amount_captured"] != float64(2000) {
			t.Fatalf("payment = %v, want captured", got)
		}
		if n := e.Sim.Stats().Captures; n != 1 {
			t.Fatalf("captures at the provider = %d, want 1", n)
		}
	})
}

func TestProviderRejectsAnOperation(t *testing.T) {
	t.Parallel()
	e := proofEnv(t, apitest.Options{})
	id := authorized(t, e, "pedido-rej", 2000)
	prov, creds := dashboard(e)
	pi := getPaymentJSON(t, e, id)["provider_payment_id"].(string)
	if res := prov.Cancel(context.Background(), creds, provider.CancelRequest{IdempotencyKey: "dashboard-cancel", IntentID: pi}); res.Answer != provider.AnswerObject {
		t.Fatalf("dashboard cancel: %+v", res)
	}

	first := capture(e, id, "k-rej", "")
	wantProblem(t, first, http.StatusConflict, "provider_rejected")
	if code := first.JSON(t)["provider_code"]; code != "payment_intent_unexpected_state" {
		t.Fatalf("provider_code = %v, want the provider's code", code)
	}
	again := capture(e, id, "k-rej", "")
	wantProblem(t, again, http.StatusConflict, "provider_rejected")
	if again.Header.Get("Idempotent-Replayed") != "true" || again.JSON(t)["provider_code"] != "payment_intent_unexpected_state" {
		t.Fatalf("retry = %d %s, want the stored refusal replayed", again.Status, again.Body)
	}
	v := adminGet(t, e, id)
	if len(v.Attempts) != 2 || v.Attempts[1].Operation != "capturar" || v.Attempts[1].Status != "failed" {
		t.Fatalf("attempts = %+v, want the capture recorded as failed", v.Attempts)
	}
	// The refusal shows the payment was canceled at the provider.
	if got := getPaymentJSON(t, e, id); got["status"] != "canceled" {
		t.Fatalf("payment = %v, want canceled as the provider shows it", got)
	}
	wantTypes(t, paymentEvents(t, e, e.APIKey, id), "payment.processing", "payment.authorized", "payment.capture_failed", "payment.canceled")
	if n := len(opRequests(e.Sim, "capture")); n != 1 {
		t.Fatalf("captures sent = %d, want 1", n)
	}
}

func TestRefundedTotalFollowsTheProvider(t *testing.T) {
	t.Parallel()
	w := newWebhookEnv(t)
	r := w.create("k-rt", `{"order_id":"pedido-rt","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`)
	wantStatus(t, r, http.StatusCreated)
	id := r.JSON(t)["id"].(string)
	in := w.intentOf(t, id)
	// Our refund never reaches the provider: it stays unknown for now.
	w.Sim.Inject(providersim.Fault{Op: "refund", Kind: providersim.Error500BeforeEffect, Times: 1})
	wantStatus(t, w.api(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/refunds", Key: "k-rt-1", Body: `{"amount":500}`}), http.StatusAccepted)
	// Meanwhile 300 is refunded in the provider's dashboard.
	payload := []byte(`{"id":"evt_rt_1","object":"event","type":"charge.refunded","data":{"object":{"id":"` + in.LatestCharge +
		`","object":"charge","amount":2000,"amount_captured":2000,"amount_refunded":300,"currency":"brl","payment_intent":"` + in.ID + `","refunded":false}}}`)
	wantOutcome(t, w.deliver(t, payload), "applied")
	if p := w.payment(t, id); p["amount_refunded"] != float64(300) {
		t.Fatalf("amount_refunded = %v, want the provider's 300", p["amount_refunded"])
	}
	// Our refund is finally re-sent and made: 300 + 500.
	w.Clock.Advance(time.Minute)
	wantStatus(t, w.api(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/refunds", Key: "k-rt-1", Body: `{"amount":500}`}), http.StatusCreated)
	payload2 := []byte(`{"id":"evt_rt_2","object":"event","type":"charge.refunded","data":{"object":{"id":"` + in.LatestCharge +
		`","object":"charge","amount":2000,"amount_captured":2000,"amount_refunded":800,"currency":"brl","payment_intent":"` + in.ID + `","refunded":false}}}`)
	wantOutcome(t, w.deliver(t, payload2), "applied")
	if p := w.payment(t, id); p["amount_refunded"] != float64(800) {
		t.Fatalf("amount_refunded = %v, want 800", p["amount_refunded"])
	}
}

// flakyStore fails chosen transactions, counted from 1, before they begin.
type flakyStore struct {
	payment.Store
	mu   sync.Mutex
	n    int
	fail func(n int) bool
}

func (s *flakyStore) WithTx(ctx context.Context, fn func(payment.Tx) error) error {
	s.mu.Lock()
	s.n++
	fail := s.fail(s.n)
	s.mu.Unlock()
	if fail {
		return fmt.Errorf("%w: injected", postgres.ErrUnavailable)
	}
	return s.Store.WithTx(ctx, fn)
}

func TestRecordingTheProviderAnswer(t *testing.T) {
	t.Parallel()

	t.Run("ATransientFailureIsRetried", func(t *testing.T) {
		t.Parallel()
		// Transaction 1 reserves, transaction 2 fails once, then records.
		e := proofEnv(t, apitest.Options{WrapStore: func(st payment.Store) payment.Store {
			return &flakyStore{Store: st, fail: func(n int) bool { return n == 2 }}
		}})
		r := create(e, "k-settle-retry", createBody("pedido-settle-retry", 2000))
		wantStatus(t, r, http.StatusCreated)
		if p := r.JSON(t); p["status"] != "authorized" {
			t.Fatalf("payment = %s, want authorized", r.Body)
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("WhenEveryTryFailsRecoveryAsksAgainWithTheSameKey", func(t *testing.T) {
		t.Parallel()
		e := proofEnv(t, apitest.Options{WrapStore: func(st payment.Store) payment.Store {
			return &flakyStore{Store: st, fail: func(n int) bool { return n >= 2 && n <= 4 }}
		}})
		body := createBody("pedido-settle-down", 2000)
		// The search does not show the intent yet, so the recovery's lookup
		// finds nothing and the key is re-sent.
		e.Sim.SetSearchLag(time.Hour)
		wantProblem(t, create(e, "k-settle-down", body), http.StatusServiceUnavailable, "unavailable")
		wantEffects(t, e.Sim, 1)
		// The provider's answer was not recorded: the attempt's lease holds
		// it until it expires, then the retry re-asks with the same key.
		wantProblem(t, create(e, "k-settle-down", body), http.StatusConflict, "idempotency_key_in_use")
		e.Clock.Advance(e.Opts.Lease + time.Second)
		r := create(e, "k-settle-down", body)
		wantStatus(t, r, http.StatusCreated)
		if p := r.JSON(t); p["status"] != "authorized" {
			t.Fatalf("payment = %s, want authorized", r.Body)
		}
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-settle-down:autorizar-v1", "pedido-settle-down:autorizar-v1")
		wantEffects(t, e.Sim, 1)
	})
}
