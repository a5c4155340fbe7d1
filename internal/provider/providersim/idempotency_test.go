package providersim

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
)

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	first, err := sc.PaymentIntents.New(authorize("pedido-842:autorizar-v1", "pm_card_visa", "manual", 2000, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := sc.PaymentIntents.New(authorize("pedido-842:autorizar-v1", "pm_card_visa", "manual", 2000, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID {
		t.Fatalf("replay id %s, want %s", again.ID, first.ID)
	}
	if h := again.LastResponse.Header.Get("Idempotent-Replayed"); h != "true" {
		t.Fatalf("Idempotent-Replayed = %q", h)
	}
	if first.LastResponse.Header.Get("Idempotent-Replayed") != "" || first.LastResponse.IdempotencyKey != "pedido-842:autorizar-v1" {
		t.Fatalf("first response headers = %v", first.LastResponse.Header)
	}
	if string(again.LastResponse.RawJSON) != string(first.LastResponse.RawJSON) {
		t.Fatalf("replay body differs:\n%s\n%s", again.LastResponse.RawJSON, first.LastResponse.RawJSON)
	}

	// Effects on an intent replay too: the second capture is not a new one.
	for range 2 {
		if _, err := sc.PaymentIntents.Capture(first.ID, withKey(&stripe.PaymentIntentCaptureParams{}, "pedido-842:capturar-v1")); err != nil {
			t.Fatal(err)
		}
	}
	// A state error after execution began is stored like any answer.
	for range 2 {
		_, err := sc.PaymentIntents.Cancel(first.ID, withKey(&stripe.PaymentIntentCancelParams{}, "pedido-842:cancelar-v1"))
		stripeErr(t, err, http.StatusBadRequest)
	}
	wantStats(t, e.sim.Stats(), Stats{Requests: 6, Replays: 3, Authorizations: 1, Captures: 1})

	var replayed int
	for _, r := range e.sim.Requests() {
		if r.Replayed {
			replayed++
		}
	}
	if replayed != 3 {
		t.Fatalf("log has %d replays, want 3", replayed)
	}
}

func TestIdempotencyKeyWithOtherParameters(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	if _, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 2000, "pay_1")); err != nil {
		t.Fatal(err)
	}
	_, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 2001, "pay_1"))
	se := stripeErr(t, err, http.StatusBadRequest)
	if se.Type != stripe.ErrorTypeIdempotency || se.Code != "" {
		t.Fatalf("error type %q code %q, want idempotency_error without code", se.Type, se.Code)
	}
	if _, ok := se.Err.(*stripe.IdempotencyError); !ok {
		t.Fatalf("typed error %T", se.Err)
	}
	// The same key on another endpoint is also a different request.
	_, err = sc.Refunds.New(withKey(&stripe.RefundParams{PaymentIntent: stripe.String("pi_x")}, "k"))
	if se := stripeErr(t, err, http.StatusBadRequest); se.Type != stripe.ErrorTypeIdempotency {
		t.Fatalf("other endpoint: %s", se.Type)
	}
	// Parameter order does not matter.
	form := url.Values{"amount": {"5"}, "currency": {"brl"}, "confirm": {"true"}, "payment_method": {"pm_card_visa"}}
	res1, body1 := e.raw(t, "POST", "/v1/payment_intents", keyA, "order", form)
	res2, body2 := e.raw(t, "POST", "/v1/payment_intents", keyA, "order",
		url.Values{"payment_method": {"pm_card_visa"}, "confirm": {"true"}, "currency": {"brl"}, "amount": {"5"}})
	if res1.StatusCode != 200 || res2.StatusCode != 200 || body1 != body2 {
		t.Fatalf("reordered params: %d %d\n%s\n%s", res1.StatusCode, res2.StatusCode, body1, body2)
	}
	wantStats(t, e.sim.Stats(), Stats{Requests: 5, Replays: 1, Authorizations: 2})
}

func TestConcurrentSameKey(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	// Deterministic: while the first request is in flight the key is locked.
	hold := e.sim.Inject(Fault{Op: "authorize", IdempotencyKey: "k1", Kind: HoldBeforeEffect, Times: 1})
	done := make(chan *stripe.PaymentIntent, 1)
	go func() {
		pi, err := sc.PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "pay_1"))
		if err != nil {
			t.Error(err)
		}
		done <- pi
	}()
	recv(t, hold.Reached(), "hold")
	_, err := sc.PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "pay_1"))
	if se := stripeErr(t, err, http.StatusConflict); se.Type != stripe.ErrorTypeIdempotency {
		t.Fatalf("in-flight error type %s", se.Type)
	}
	hold.Release()
	first := recv(t, done, "the held request's answer")
	again, err := sc.PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil || first == nil || again.ID != first.ID {
		t.Fatalf("after release: %v, %v, want %v", again, err, first)
	}

	// A burst: one effect, everyone else 409 or a replay of the same intent.
	const n = 30
	var wg sync.WaitGroup
	ids := make(chan string, n)
	for range n {
		wg.Go(func() {
			pi, err := sc.PaymentIntents.New(authorize("k2", "pm_card_visa", "automatic", 100, "pay_2"))
			if err != nil {
				if se, ok := err.(*stripe.Error); !ok || se.HTTPStatusCode != http.StatusConflict {
					t.Errorf("burst error %v", err)
				}
				return
			}
			ids <- pi.ID
		})
	}
	wait(t, &wg, "the burst")
	close(ids)
	var id string
	for got := range ids {
		if id != "" && got != id {
			t.Fatalf("burst produced %s and %s", id, got)
		}
		id = got
	}
	if got := e.sim.Stats().Authorizations; got != 2 {
		t.Fatalf("authorizations = %d, want 2", got)
	}
}

func TestKeyRetention(t *testing.T) {
	t.Parallel()
	clock := newClock()
	e := start(t, Options{Now: clock.Now, KeyRetention: 24 * time.Hour})
	sc := e.client(keyA)
	create := func() string {
		t.Helper()
		pi, err := sc.PaymentIntents.New(authorize("pedido-1:autorizar-v1", "pm_card_visa", "manual", 100, "pay_1"))
		if err != nil {
			t.Fatal(err)
		}
		return pi.ID
	}

	first := create()
	clock.Add(24*time.Hour - time.Second)
	if again := create(); again != first {
		t.Fatalf("within retention got %s, want %s", again, first)
	}
	// Past retention the provider has forgotten the key: re-sending it makes
	// a second charge. This is what the service must never do.
	clock.Add(time.Second)
	second := create()
	if second == first {
		t.Fatal("key was not forgotten after retention")
	}
	e.sim.ForgetIdempotencyKeys()
	if third := create(); third == second {
		t.Fatal("ForgetIdempotencyKeys kept the key")
	}
	wantStats(t, e.sim.Stats(), Stats{Requests: 4, Replays: 1, Authorizations: 3})
}
