package providersim

import (
	"net/http"
	"strings"
	"testing"

	stripe "github.com/stripe/stripe-go/v76"
)

func TestRevokedSecret(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	first, err := sc.PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil {
		t.Fatal(err)
	}
	// A request in flight when the key is revoked: its key stays claimed.
	hold := e.sim.Inject(Fault{IdempotencyKey: "k3", Kind: HoldBeforeEffect, Times: 1})
	held := make(chan error, 1)
	go func() {
		_, err := sc.PaymentIntents.New(authorize("k3", "pm_card_visa", "manual", 100, "pay_3"))
		held <- err
	}()
	recv(t, hold.Reached(), "hold")
	anyReq := e.sim.Inject(Fault{Kind: Error500BeforeEffect})

	e.sim.RevokeSecret(keyA)
	revoked := func(err error) {
		t.Helper()
		se := stripeErr(t, err, http.StatusUnauthorized)
		if se.Type != stripe.ErrorTypeInvalidRequest || se.Code != "" || se.Msg != "Invalid API Key provided: sk_test_*****nt_a" {
			t.Fatalf("revoked: type %q code %q message %q", se.Type, se.Code, se.Msg)
		}
		if _, ok := se.Err.(*stripe.InvalidRequestError); !ok {
			t.Fatalf("typed error %T", se.Err)
		}
		if h := se.LastResponse.Header.Get("Idempotent-Replayed"); h != "" {
			t.Fatalf("revoked answer marked replayed")
		}
	}
	// Authentication comes before the key lookup: no replay, no 409 for the
	// in-flight key, no new effect, no fault.
	_, err = sc.PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "pay_1"))
	revoked(err)
	_, err = sc.PaymentIntents.New(authorize("k3", "pm_card_visa", "manual", 100, "pay_3"))
	revoked(err)
	_, err = sc.PaymentIntents.New(authorize("k2", "pm_card_visa", "manual", 100, "pay_2"))
	revoked(err)
	_, err = sc.PaymentIntents.Get(first.ID, nil)
	revoked(err)
	if res, body := e.raw(t, "GET", "/v1/customers", keyA, "", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unknown route with a revoked key: %d %s", res.StatusCode, body)
	}
	if n := anyReq.Hits(); n != 0 {
		t.Fatalf("a fault acted on %d revoked requests", n)
	}
	anyReq.Remove()
	if _, err := e.client(keyB).PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "pay_1")); err != nil {
		t.Fatalf("another key: %v", err)
	}
	wantStats(t, e.sim.StatsFor(keyA), Stats{Requests: 7, Authorizations: 1})
	var logged int
	for _, r := range e.sim.Requests() {
		if r.Status != http.StatusUnauthorized {
			continue
		}
		if logged++; r.SecretKey != keyA || r.Replayed || r.Fault != "" {
			t.Fatalf("logged %+v", r)
		}
	}
	if logged != 5 {
		t.Fatalf("logged %d revoked requests, want 5", logged)
	}

	// The held request finishes: a provider completes what it accepted.
	hold.Release()
	if err := recv(t, held, "the held authorization's answer"); err != nil {
		t.Fatal(err)
	}
	e.sim.RestoreSecret(keyA)
	again, err := sc.PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "pay_1"))
	if err != nil || again.ID != first.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after restore k1 = %v, %v; want a replay of %s", again, err, first.ID)
	}
	// The revoked attempt with k2 consumed nothing: it executes now.
	if _, err := sc.PaymentIntents.New(authorize("k2", "pm_card_visa", "manual", 100, "pay_2")); err != nil {
		t.Fatal(err)
	}
	wantStats(t, e.sim.StatsFor(keyA), Stats{Requests: 9, Replays: 1, Authorizations: 3})
}

func TestForbiddenSecret(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)

	e.sim.ForbidSecret(keyA, "refund")
	pi, err := sc.PaymentIntents.New(authorize("", "pm_card_visa", "automatic", 100, "pay_1"))
	if err != nil {
		t.Fatalf("authorize is still permitted: %v", err)
	}
	refund := func() (*stripe.Refund, error) {
		return sc.Refunds.New(withKey(&stripe.RefundParams{PaymentIntent: stripe.String(pi.ID)}, "r1"))
	}
	_, err = refund()
	se := stripeErr(t, err, http.StatusForbidden)
	if se.Type != stripe.ErrorTypeInvalidRequest || !strings.HasPrefix(se.Msg, "The provided key 'sk_test_*****nt_a' does not have the required permissions") ||
		!strings.Contains(se.Msg, "Having the rak_refund_write permission") {
		t.Fatalf("forbidden: type %q message %q", se.Type, se.Msg)
	}
	wantStats(t, e.sim.StatsFor(keyA), Stats{Requests: 2, Authorizations: 1})

	// Without ops every operation is forbidden; unknown routes stay 404.
	e.sim.ForbidSecret(keyA)
	_, err = sc.PaymentIntents.Get(pi.ID, nil)
	if se := stripeErr(t, err, http.StatusForbidden); !strings.Contains(se.Msg, "rak_payment_intent_read") {
		t.Fatalf("retrieve: %q", se.Msg)
	}
	if res, _ := e.raw(t, "GET", "/v1/customers", keyA, "", nil); res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown route: %d", res.StatusCode)
	}

	// A 403 is not stored against the key: once permitted, r1 executes.
	e.sim.RestoreSecret(keyA)
	re, err := refund()
	if err != nil || re.LastResponse.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("after restore: %v, %v", re, err)
	}
	wantStats(t, e.sim.StatsFor(keyA), Stats{Requests: 5, Authorizations: 1, Refunds: 1})

	defer func() {
		if recover() == nil {
			t.Error("ForbidSecret with an unknown operation did not panic")
		}
	}()
	e.sim.ForbidSecret(keyA, "explode")
}

func TestControlSecrets(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)
	create := func(idemKey string) error {
		_, err := sc.PaymentIntents.New(authorize(idemKey, "pm_card_visa", "manual", 100, "pay_1"))
		return err
	}

	e.ctl(t, "POST", "/_sim/secrets/revoke", `{"secret_key":"`+keyA+`"}`, 204, nil)
	stripeErr(t, create("k1"), http.StatusUnauthorized)
	e.ctl(t, "POST", "/_sim/secrets/restore", `{"secret_key":"`+keyA+`"}`, 204, nil)
	if err := create("k1"); err != nil {
		t.Fatal(err)
	}
	e.ctl(t, "POST", "/_sim/secrets/forbid", `{"secret_key":"`+keyA+`","ops":["authorize"]}`, 204, nil)
	stripeErr(t, create("k2"), http.StatusForbidden)
	e.ctl(t, "POST", "/_sim/secrets/restore", `{"secret_key":"`+keyA+`"}`, 204, nil)
	if err := create("k2"); err != nil {
		t.Fatal(err)
	}

	e.ctl(t, "POST", "/_sim/secrets/revoke", `{}`, 400, nil)
	e.ctl(t, "POST", "/_sim/secrets/revoke", `{"secret_key":"pk_test_x"}`, 400, nil)
	e.ctl(t, "POST", "/_sim/secrets/revoke", `{"secret_key":"`+keyA+`","ops":["refund"]}`, 400, nil)
	e.ctl(t, "POST", "/_sim/secrets/forbid", `{"secret_key":"`+keyA+`","ops":["explode"]}`, 400, nil)
	e.ctl(t, "POST", "/_sim/secrets/revoke", `{"key":"`+keyA+`"}`, 400, nil)
	e.ctl(t, "POST", "/_sim/secrets/rotate", `{"secret_key":"`+keyA+`"}`, 404, nil)
	if err := create("k3"); err != nil {
		t.Fatalf("rejected control calls changed the key: %v", err)
	}
}

func TestMaskKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, want string }{
		{"sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_********************p7dc"},
		{"sk_test_abcd", "sk_test_****"},
		{"sk_test_x", "sk_test_*"},
		{"sk_1", "sk_1"},
	} {
		if got := maskKey(tc.key); got != tc.want {
			t.Errorf("maskKey(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
