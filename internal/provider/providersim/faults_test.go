package providersim

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
)

// notStripeErr asserts err is a transport failure, not an API answer.
func notStripeErr(t *testing.T, err error) {
	t.Helper()
	var se *stripe.Error
	if err == nil || errors.As(err, &se) {
		t.Fatalf("err = %v, want a transport error", err)
	}
}

func TestDropAfterEffect(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	drop := e.sim.Inject(Fault{Op: "authorize", Kind: DropAfterEffect, Times: 1})
	_, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
	notStripeErr(t, err)
	if drop.Hits() != 1 {
		t.Fatalf("hits = %d", drop.Hits())
	}
	wantStats(t, e.sim.Stats(), Stats{Requests: 1, Authorizations: 1})
	stored := e.sim.Intents(keyA)[0]

	pi, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	if pi.ID != stored.ID {
		t.Fatalf("retry got %s, want %s", pi.ID, stored.ID)
	}
	wantStats(t, e.sim.Stats(), Stats{Requests: 2, Replays: 1, Authorizations: 1})
	if log := e.sim.Requests(); log[0].Status != 0 || log[0].Fault != DropAfterEffect || !log[1].Replayed {
		t.Fatalf("log = %+v", log)
	}
}

// On a reused keep-alive connection net/http itself re-sends a POST that
// carries an Idempotency-Key when the response is lost, even with stripe-go
// retries off: a single drop is invisible to the caller.
func TestDropOnReusedConnectionIsResentByNetHTTP(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)
	if _, err := sc.PaymentIntents.New(authorize("warm", "pm_card_visa", "manual", 100, "pay_0")); err != nil {
		t.Fatal(err)
	}

	e.sim.Inject(Fault{IdempotencyKey: "k1", Kind: DropAfterEffect, Times: 1})
	pi, err := sc.PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatalf("single drop on a reused connection: %v", err)
	}
	if st := e.sim.Stats(); st.Authorizations != 2 || st.Replays != 1 || pi.ID != e.sim.Intents(keyA)[1].ID {
		t.Fatalf("stats = %+v", st)
	}

	// Dropping every attempt makes the loss visible.
	if _, err := sc.PaymentIntents.New(authorize("warm2", "pm_card_visa", "manual", 100, "pay_0")); err != nil {
		t.Fatal(err)
	}
	always := e.sim.Inject(Fault{IdempotencyKey: "k2", Kind: DropAfterEffect})
	_, err = sc.PaymentIntents.New(authorize("k2", "pm_card_visa", "manual", 100, "pay_2"))
	notStripeErr(t, err)
	always.Remove()
	if st := e.sim.Stats(); st.Authorizations != 4 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestErrorsBeforeEffectThenRetry(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	for _, tc := range []struct {
		kind    FaultKind
		status  int
		errType stripe.ErrorType
	}{
		{Error500BeforeEffect, http.StatusInternalServerError, stripe.ErrorTypeAPI},
		{RateLimit429BeforeEffect, http.StatusTooManyRequests, stripe.ErrorTypeInvalidRequest},
	} {
		key := string(tc.kind)
		f := e.sim.Inject(Fault{Op: "authorize", IdempotencyKey: key, Kind: tc.kind, Times: 1})
		before := e.sim.Stats()
		_, err := sc.PaymentIntents.New(authorize(key, "pm_card_visa", "automatic", 100, "pay_1"))
		if se := stripeErr(t, err, tc.status); se.Type != tc.errType {
			t.Fatalf("%s: type %s", tc.kind, se.Type)
		}
		if got := e.sim.Stats(); got.Authorizations != before.Authorizations {
			t.Fatalf("%s: effect happened: %+v", tc.kind, got)
		}
		if _, err := sc.PaymentIntents.New(authorize(key, "pm_card_visa", "automatic", 100, "pay_1")); err != nil {
			t.Fatalf("%s: retry: %v", tc.kind, err)
		}
		if got := e.sim.Stats(); got.Authorizations != before.Authorizations+1 || got.Replays != 0 {
			t.Fatalf("%s: after retry %+v", tc.kind, got)
		}
		if f.Hits() != 1 {
			t.Fatalf("%s: hits %d", tc.kind, f.Hits())
		}
	}

	// A fault on a completed key answers instead of the replay; the stored
	// result survives it.
	f := e.sim.Inject(Fault{Kind: Error500BeforeEffect, Times: 1})
	_, err := sc.PaymentIntents.New(authorize(string(Error500BeforeEffect), "pm_card_visa", "automatic", 100, "pay_1"))
	stripeErr(t, err, http.StatusInternalServerError)
	if _, err := sc.PaymentIntents.New(authorize(string(Error500BeforeEffect), "pm_card_visa", "automatic", 100, "pay_1")); err != nil {
		t.Fatal(err)
	}
	if st := e.sim.Stats(); st.Authorizations != 2 || st.Replays != 1 || f.Hits() != 1 {
		t.Fatalf("stats %+v hits %d", st, f.Hits())
	}
}

func TestHoldBeforeEffect(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)
	pi, err := sc.PaymentIntents.New(authorize("", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}

	hold := e.sim.Inject(Fault{Op: "capture", Kind: HoldBeforeEffect})
	errc := make(chan error, 1)
	go func() {
		_, err := sc.PaymentIntents.Capture(pi.ID, withKey(&stripe.PaymentIntentCaptureParams{}, "cap-1"))
		errc <- err
	}()
	recv(t, hold.Reached(), "hold reached")
	if got := e.sim.Stats().Captures; got != 0 {
		t.Fatalf("captured while held before effect")
	}
	hold.Release()
	hold.Release() // idempotent
	if err := recv(t, errc, "the held capture's answer"); err != nil {
		t.Fatal(err)
	}
	if got := e.sim.Stats().Captures; got != 1 {
		t.Fatalf("captures = %d", got)
	}
	// Released stays released for later matches.
	if _, err := sc.PaymentIntents.Capture(pi.ID, withKey(&stripe.PaymentIntentCaptureParams{}, "cap-1")); err != nil || hold.Hits() != 2 {
		t.Fatalf("after release: %v, hits %d", err, hold.Hits())
	}
}

func TestHoldAfterEffect(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	hold := e.sim.Inject(Fault{IdempotencyKey: "k", Kind: HoldAfterEffect, Times: 1})
	done := make(chan *stripe.PaymentIntent, 1)
	go func() {
		pi, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
		if err != nil {
			t.Error(err)
		}
		done <- pi
	}()
	recv(t, hold.Reached(), "hold reached")
	if got := e.sim.Stats().Authorizations; got != 1 {
		t.Fatalf("authorizations while held after effect = %d", got)
	}
	// The result is stored before the response leaves: a retry replays it.
	replay, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	hold.Release()
	if first := recv(t, done, "the held authorization's answer"); first == nil || first.ID != replay.ID {
		t.Fatalf("held answer %v, replay %s", first, replay.ID)
	}
	wantStats(t, e.sim.Stats(), Stats{Requests: 2, Replays: 1, Authorizations: 1})
}

// A held request outlives a client that gave up: once released it still
// takes effect, like a provider finishing work nobody waits for.
func TestHeldRequestOutlivesClient(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	hold := e.sim.Inject(Fault{Kind: HoldBeforeEffect, Times: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := authorize("k", "pm_card_visa", "manual", 100, "pay_1")
	p.Context = ctx
	errc := make(chan error, 1)
	go func() {
		_, err := sc.PaymentIntents.New(p)
		errc <- err
	}()
	// The client gives up only once its request is held; a deadline could
	// expire before the request arrives and leave the hold to the retry.
	recv(t, hold.Reached(), "hold reached")
	cancel()
	if err := recv(t, errc, "the abandoned authorization's answer"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
	// Still in flight: a retry with the key is refused.
	_, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
	stripeErr(t, err, http.StatusConflict)

	hold.Release()
	eventually(t, "held request to finish", func() bool { return len(e.sim.Requests()) == 2 })
	if st := e.sim.Stats(); st.Authorizations != 1 {
		t.Fatalf("stats = %+v", st)
	}
	pi, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil || pi.ID != e.sim.Intents(keyA)[0].ID {
		t.Fatalf("retry after release = %v, %v", pi, err)
	}
}

func TestDelayAfterEffect(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	e.sim.Inject(Fault{Op: "authorize", Kind: DelayAfterEffect, Delay: 20 * time.Millisecond, Times: 1})
	start := time.Now()
	if _, err := sc.PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "pay_1")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("answered after %v", d)
	}

	// A client that times out during the delay: the effect stands and the
	// server side ends with the client, not after the delay.
	e.sim.Inject(Fault{Op: "authorize", Kind: DelayAfterEffect, Delay: time.Hour, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	p := authorize("k2", "pm_card_visa", "manual", 100, "pay_2")
	p.Context = ctx
	_, err := sc.PaymentIntents.New(p)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	eventually(t, "delayed request to end", func() bool { return len(e.sim.Requests()) == 2 })
	if st := e.sim.Stats(); st.Authorizations != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestFaultMatchingAndLifecycle(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)
	pi, err := sc.PaymentIntents.New(authorize("", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}

	onRetrieve := e.sim.Inject(Fault{Op: "retrieve", Kind: Error500BeforeEffect, Times: 2})
	onOtherKey := e.sim.Inject(Fault{IdempotencyKey: "other", Kind: Error500BeforeEffect})
	for range 3 {
		_, err = sc.PaymentIntents.Get(pi.ID, nil)
	}
	if err != nil || onRetrieve.Hits() != 2 || onOtherKey.Hits() != 0 {
		t.Fatalf("err %v, hits %d/%d", err, onRetrieve.Hits(), onOtherKey.Hits())
	}
	select {
	case <-onOtherKey.Reached():
		t.Fatal("unmatched fault reached")
	default:
	}

	// The earliest matching fault of a phase wins; phases combine.
	first := e.sim.Inject(Fault{Op: "capture", Kind: HoldBeforeEffect})
	second := e.sim.Inject(Fault{Op: "capture", Kind: Error500BeforeEffect})
	after := e.sim.Inject(Fault{Op: "capture", Kind: DelayAfterEffect, Delay: time.Millisecond})
	first.Release()
	if _, err := sc.PaymentIntents.Capture(pi.ID, nil); err != nil {
		t.Fatal(err)
	}
	if first.Hits() != 1 || second.Hits() != 0 || after.Hits() != 1 {
		t.Fatalf("hits %d %d %d", first.Hits(), second.Hits(), after.Hits())
	}
	first.Remove()
	_, err = sc.PaymentIntents.Capture(pi.ID, nil)
	stripeErr(t, err, http.StatusInternalServerError)

	_, err = sc.PaymentIntents.New(authorize("other", "pm_card_visa", "manual", 100, "pay_2"))
	stripeErr(t, err, http.StatusInternalServerError)
	e.sim.ClearFaults()
	if _, err := sc.PaymentIntents.New(authorize("other", "pm_card_visa", "manual", 100, "pay_2")); err != nil || onOtherKey.Hits() != 1 {
		t.Fatalf("after ClearFaults: %v, hits %d", err, onOtherKey.Hits())
	}
}

func TestRandomFaults(t *testing.T) {
	t.Parallel()
	e := start(t, Options{RandomFaults: RandomFaults{Drop: 1, Seed: 7}})
	sc := e.client(keyA)

	_, err := sc.PaymentIntents.New(authorize("k", "pm_card_visa", "manual", 100, "pay_1"))
	notStripeErr(t, err)
	// Reads are never randomly faulted.
	id := e.sim.Intents(keyA)[0].ID
	if _, err := sc.PaymentIntents.Get(id, nil); err != nil {
		t.Fatal(err)
	}

	e.sim.SetRandomFaults(RandomFaults{Error500: 1})
	_, err = sc.PaymentIntents.Capture(id, nil)
	stripeErr(t, err, http.StatusInternalServerError)

	e.sim.SetRandomFaults(RandomFaults{})
	if _, err := sc.PaymentIntents.Capture(id, nil); err != nil {
		t.Fatal(err)
	}
	if st := e.sim.Stats(); st.Authorizations != 1 || st.Captures != 1 {
		t.Fatalf("stats = %+v", st)
	}
}
