package providersim

import (
	"net/http"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
)

func TestAdvanceMovesTheClock(t *testing.T) {
	t.Parallel()
	clock := newClock()
	e := start(t, Options{Now: clock.Now})
	sc := e.client(keyA)

	t0 := clock.Now()
	e.sim.Advance(25 * time.Hour)
	clock.Add(time.Minute) // the injected clock still counts underneath
	if got, want := e.sim.Now(), t0.Add(25*time.Hour+time.Minute); !got.Equal(want) {
		t.Fatalf("Now = %v, want %v", got, want)
	}
	pi, err := sc.PaymentIntents.New(authorize("", "pm_card_visa", "automatic", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(25*time.Hour + time.Minute).Unix(); pi.Created != want {
		t.Fatalf("created = %d, want %d", pi.Created, want)
	}
	if got := e.sim.Requests()[0].Time; !got.Equal(e.sim.Now()) {
		t.Fatalf("logged time = %v, want %v", got, e.sim.Now())
	}

	defer func() {
		if recover() == nil {
			t.Error("Advance(-1) did not panic")
		}
	}()
	e.sim.Advance(-time.Nanosecond)
}

// A key re-sent after retention is a new request at Stripe: a second refund
// of the same payment. The service must never re-send a key that old.
func TestKeyRetentionRefundAfterAdvance(t *testing.T) {
	t.Parallel()
	e := start(t, Options{KeyRetention: 24 * time.Hour})
	sc := e.client(keyA)
	pi, err := sc.PaymentIntents.New(authorize("", "pm_card_visa", "automatic", 1000, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	refund := func() *stripe.Refund {
		t.Helper()
		re, err := sc.Refunds.New(withKey(&stripe.RefundParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(300)}, "refund-1:v1"))
		if err != nil {
			t.Fatal(err)
		}
		return re
	}

	first := refund()
	e.sim.Advance(24*time.Hour - time.Second)
	if again := refund(); again.ID != first.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("within retention got %s, want a replay of %s", again.ID, first.ID)
	}
	e.sim.Advance(time.Second)
	second := refund()
	if second.ID == first.ID {
		t.Fatal("key was not forgotten after retention")
	}
	if got := e.sim.Intents(keyA)[0].AmountRefunded; got != 600 {
		t.Fatalf("amount refunded = %d, want 600 (two refunds)", got)
	}
	wantStats(t, e.sim.Stats(), Stats{Requests: 4, Replays: 1, Authorizations: 1, Refunds: 2})
}

// Expired keys are also swept, so long runs do not keep every key, and the
// sweep follows the simulator's clock, not the wall clock.
func TestExpiredKeysAreSwept(t *testing.T) {
	t.Parallel()
	clock := newClock()
	e := start(t, Options{Now: clock.Now, KeyRetention: time.Hour})
	sc := e.client(keyA)
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, err := sc.PaymentIntents.New(authorize(k, "pm_card_visa", "manual", 100, "pay_"+k)); err != nil {
			t.Fatal(err)
		}
	}
	keys := func() int {
		e.sim.mu.Lock()
		defer e.sim.mu.Unlock()
		return len(e.sim.accounts[keyA].keys)
	}
	if n := keys(); n != 3 {
		t.Fatalf("stored keys = %d, want 3", n)
	}
	e.sim.Advance(time.Hour)
	if _, err := sc.PaymentIntents.New(authorize("k4", "pm_card_visa", "manual", 100, "pay_k4")); err != nil {
		t.Fatal(err)
	}
	if n := keys(); n != 1 {
		t.Fatalf("stored keys after retention = %d, want only k4", n)
	}
}

// A key whose first request is still running is never forgotten by age: the
// retry meets the in-flight request, not a fresh execution.
func TestInFlightKeyOutlivesRetention(t *testing.T) {
	t.Parallel()
	e := start(t, Options{KeyRetention: time.Hour})
	sc := e.client(keyA)

	hold := e.sim.Inject(Fault{IdempotencyKey: "k", Kind: HoldBeforeEffect, Times: 1})
	done := make(chan error, 1)
	go func() {
		_, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
		done <- err
	}()
	recv(t, hold.Reached(), "hold")
	e.sim.Advance(48 * time.Hour)
	_, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
	if se := stripeErr(t, err, http.StatusConflict); se.Type != stripe.ErrorTypeIdempotency {
		t.Fatalf("retry during the held request: %s", se.Type)
	}
	hold.Release()
	if err := recv(t, done, "the held authorization's answer"); err != nil {
		t.Fatal(err)
	}
	if got := e.sim.Stats().Authorizations; got != 1 {
		t.Fatalf("authorizations = %d, want 1", got)
	}
}

func TestControlClock(t *testing.T) {
	t.Parallel()
	clock := newClock()
	e := start(t, Options{Now: clock.Now, KeyRetention: 24 * time.Hour})
	sc := e.client(keyA)

	first, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	var got clockJSON
	e.ctl(t, "POST", "/_sim/clock/advance", `{"by":"25h"}`, 200, &got)
	if want := clock.Now().Add(25 * time.Hour); !got.Now.Equal(want) || got.Offset != "25h0m0s" {
		t.Fatalf("advance = %+v, want now %v offset 25h0m0s", got, want)
	}
	e.ctl(t, "GET", "/_sim/clock", "", 200, &got)
	if got.Offset != "25h0m0s" {
		t.Fatalf("clock = %+v", got)
	}
	second, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	if second.ID == first.ID {
		t.Fatal("key survived an advance past retention")
	}

	e.ctl(t, "POST", "/_sim/clock/advance", `{"by":"-1h"}`, 400, nil)
	e.ctl(t, "POST", "/_sim/clock/advance", `{"by":"tomorrow"}`, 400, nil)
	e.ctl(t, "POST", "/_sim/clock/advance", `{}`, 400, nil)
	e.ctl(t, "POST", "/_sim/clock/advance", `{"for":"1h"}`, 400, nil)
	if got := e.sim.Now(); !got.Equal(clock.Now().Add(25 * time.Hour)) {
		t.Fatalf("rejected advances moved the clock to %v", got)
	}
}

func TestControlClockReset(t *testing.T) {
	t.Parallel()
	clock := newClock()
	e := start(t, Options{Now: clock.Now, KeyRetention: 24 * time.Hour})
	sc := e.client(keyA)

	forgotten, err := sc.PaymentIntents.New(authorize("old", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	e.ctl(t, "POST", "/_sim/clock/advance", `{"by":"48h"}`, 200, nil)
	kept, err := sc.PaymentIntents.New(authorize("new", "pm_card_visa", "manual", 100, "pay_2"))
	if err != nil {
		t.Fatal(err)
	}

	var got clockJSON
	e.ctl(t, "POST", "/_sim/clock/reset", "", 200, &got)
	if !got.Now.Equal(clock.Now()) || got.Offset != "0s" {
		t.Fatalf("reset = %+v, want now %v offset 0s", got, clock.Now())
	}
	if now := e.sim.Now(); !now.Equal(clock.Now()) {
		t.Fatalf("Now() = %v after reset, want %v", now, clock.Now())
	}

	// A key forgotten under the advanced clock stays forgotten.
	again, err := sc.PaymentIntents.New(authorize("old", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID == forgotten.ID {
		t.Fatal("reset revived a key forgotten past retention")
	}
	// A key made under the advanced clock keeps its age: replayed within
	// retention, forgotten once retention has passed since it was made.
	clock.Add(24*time.Hour - time.Second)
	replay, err := sc.PaymentIntents.New(authorize("new", "pm_card_visa", "manual", 100, "pay_2"))
	if err != nil {
		t.Fatal(err)
	}
	if replay.ID != kept.ID {
		t.Fatal("reset dropped a key still within retention")
	}
	clock.Add(time.Second)
	fresh, err := sc.PaymentIntents.New(authorize("new", "pm_card_visa", "manual", 100, "pay_2"))
	if err != nil {
		t.Fatal(err)
	}
	if fresh.ID == kept.ID {
		t.Fatal("reset made a key outlive its retention")
	}
}
