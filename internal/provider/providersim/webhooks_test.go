package providersim

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"
)

const whsec = "whsec_test_simulator"

// receiver is a webhook endpoint that verifies each delivery as the service
// does, with stripe-go's webhook package (strictly: the API version too).
type receiver struct {
	mu     sync.Mutex
	events []stripe.Event
	errs   []error
	url    string
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), whsec)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if err != nil {
			rc.errs = append(rc.errs, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.events = append(rc.events, ev)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/webhooks/stripe/acct_1"
	return rc
}

// received waits for every queued delivery, then returns every event that
// arrived, in arrival order.
func (rc *receiver) received(t *testing.T, sim *Server) []stripe.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sim.WaitWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.errs) > 0 {
		t.Fatalf("deliveries refused: %v", rc.errs)
	}
	return append([]stripe.Event(nil), rc.events...)
}

func summary(evs []stripe.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(string(ev.Type) + ":" + ev.Data.Object["status"].(string) + " ")
	}
	return strings.TrimSpace(b.String())
}

func TestWebhooksAreSignedAsStripeSignsThem(t *testing.T) {
	t.Parallel()
	clock := newClock() // far from the wall clock: signatures must not use it
	e := start(t, Options{Now: clock.Now})
	rc := newReceiver(t)
	e.sim.RegisterWebhookEndpoint(keyA, rc.url, whsec)

	pi, err := e.client(keyA).PaymentIntents.New(pixParams("k", 600))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Pay(pi.ID); err != nil {
		t.Fatal(err)
	}
	// Another key's events go nowhere: it has no endpoint.
	if _, err := e.client(keyB).PaymentIntents.New(authorize("k", "pm_card_visa", "automatic", 100, "p")); err != nil {
		t.Fatal(err)
	}
	evs := rc.received(t, e.sim)
	if got := summary(evs); got != "payment_intent.requires_action:requires_action payment_intent.succeeded:succeeded" {
		t.Fatalf("received %s", got)
	}
	for _, ev := range evs {
		var got stripe.PaymentIntent
		if err := got.UnmarshalJSON(ev.Data.Raw); err != nil || got.ID != pi.ID {
			t.Fatalf("data.object = %s, %v", ev.Data.Raw, err)
		}
		if ev.APIVersion != stripe.APIVersion || ev.Created != clock.Now().Unix() || !strings.HasPrefix(ev.ID, "evt_") {
			t.Fatalf("event %s: api_version %s created %d", ev.ID, ev.APIVersion, ev.Created)
		}
	}
	if first := evs[0]; first.Data.Object["next_action"].(map[string]any)["type"] != "pix_display_qr_code" {
		t.Fatalf("requires_action event lacks next_action: %s", first.Data.Raw)
	}

	// A wrong secret is refused by the receiver: the signature is real.
	e.sim.RegisterWebhookEndpoint(keyA, rc.url, "whsec_other")
	if _, err := e.sim.Expire(mustPix(t, e, "k2").ID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.sim.WaitWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	ds := e.sim.WebhookDeliveries()
	if last := ds[len(ds)-1]; last.Status != http.StatusBadRequest || len(ds) != 4 {
		t.Fatalf("deliveries = %+v, want the last (of 4) refused", ds)
	}
}

func mustPix(t *testing.T, e *env, key string) *stripe.PaymentIntent {
	t.Helper()
	pi, err := e.client(keyA).PaymentIntents.New(pixParams(key, 600))
	if err != nil {
		t.Fatal(err)
	}
	return pi
}

func TestWebhooksDuplicatedAndReordered(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	rc := newReceiver(t)
	// Through the control API, as a test of a separate process would.
	for _, c := range []struct{ path, body string }{
		{"/_sim/webhook_endpoints", `{"secret_key":"` + keyA + `","url":"` + rc.url + `","secret":"` + whsec + `"}`},
		{"/_sim/webhooks/duplicate", `{"on":true}`},
	} {
		res, err := e.http.Post(e.url+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			t.Fatalf("POST %s = %d", c.path, res.StatusCode)
		}
	}
	pi := mustPix(t, e, "k1")
	if _, err := e.sim.Pay(pi.ID); err != nil {
		t.Fatal(err)
	}
	evs := rc.received(t, e.sim)
	if len(evs) != 4 || evs[0].ID != evs[1].ID || evs[2].ID != evs[3].ID || evs[0].ID == evs[2].ID {
		t.Fatalf("duplicated deliveries = %s", summary(evs))
	}

	e.sim.DuplicateWebhooks(false)
	e.sim.HoldWebhooks()
	pi2 := mustPix(t, e, "k2")
	if _, err := e.sim.MarkProcessing(pi2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Pay(pi2.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(rc.received(t, e.sim)); n != 4 {
		t.Fatalf("%d deliveries while held, want the 4 from before", n)
	}
	res, body := e.raw(t, http.MethodPost, "/_sim/webhooks/release", "", "", nil)
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("release without a body = %d %s", res.StatusCode, body)
	}
	rel, err := e.http.Post(e.url+"/_sim/webhooks/release", "application/json", strings.NewReader(`{"reverse":true}`))
	if err != nil {
		t.Fatal(err)
	}
	rel.Body.Close()
	evs = rc.received(t, e.sim)[4:]
	if got := summary(evs); got != "payment_intent.succeeded:succeeded payment_intent.processing:processing payment_intent.requires_action:requires_action" {
		t.Fatalf("released in reverse: %s", got)
	}
	if !e.sim.Redeliver(evs[0].ID) {
		t.Fatal("Redeliver found nothing")
	}
	if again := rc.received(t, e.sim); again[len(again)-1].ID != evs[0].ID {
		t.Fatal("redelivery did not arrive")
	}
}

func TestCardTransitionsEmitEvents(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	sc := e.client(keyA)
	held, err := sc.PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "p1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.PaymentIntents.Capture(held.ID, nil); err != nil {
		t.Fatal(err)
	}
	voided, err := sc.PaymentIntents.New(authorize("k2", "pm_card_visa", "manual", 100, "p2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.PaymentIntents.Cancel(voided.ID, nil); err != nil {
		t.Fatal(err)
	}
	_, err = sc.PaymentIntents.New(authorize("k3", "pm_card_chargeDeclined", "automatic", 100, "p3"))
	stripeErr(t, err, http.StatusPaymentRequired)
	// A replay is the same answer, not a second transition.
	if _, err := sc.PaymentIntents.New(authorize("k1", "pm_card_visa", "manual", 100, "p1")); err != nil {
		t.Fatal(err)
	}
	wantEventTypes(t, e.sim.Events(keyA),
		"payment_intent.amount_capturable_updated", "payment_intent.succeeded",
		"payment_intent.amount_capturable_updated", "payment_intent.canceled",
		"payment_intent.payment_failed")
}
