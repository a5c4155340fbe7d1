package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/postgres/pgfault"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// behindProxy starts the real binary with its pool behind a fault proxy
// (DATABASE_URL through the proxy, migrations direct).
func behindProxy(t *testing.T, extraEnv ...string) (*apitest.Env, *proc, *pgfault.Proxy) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the real binary; skipped in -short")
	}
	e := apitest.New(t, apitest.Options{})
	u, err := url.Parse(e.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	px, err := pgfault.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	env := append([]string{"DATABASE_URL=" + px.URL(e.DBURL), "MIGRATE_DATABASE_URL=" + e.DBURL}, extraEnv...)
	return e, start(t, e, buildBinary(t, ""), env...), px
}

// behindProxyWithMerchant is behindProxy with a merchant webhook endpoint
// for every event.
func behindProxyWithMerchant(t *testing.T) (*apitest.Env, *proc, *pgfault.Proxy, *merchant) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the real binary; skipped in -short")
	}
	e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
	m := newMerchant()
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	registerMerchant(t, e, m, srv.URL)
	u, err := url.Parse(e.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	px, err := pgfault.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	p := start(t, e, buildBinary(t, ""), "DATABASE_URL="+px.URL(e.DBURL), "MIGRATE_DATABASE_URL="+e.DBURL,
		"WEBHOOK_ALLOW_PRIVATE=true")
	return e, p, px, m
}

func create(e *apitest.Env, p *proc, key string) (*apitest.Response, error) {
	return e.TryDo(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: crashBody, BaseURL: p.url})
}

// assertRecorded checks that a final answer is the one the database holds:
// the key replays it byte for byte.
func assertRecorded(t *testing.T, e *apitest.Env, p *proc, key string, final *apitest.Response) {
	t.Helper()
	again := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: crashBody, BaseURL: p.url})
	if again.Header.Get("Idempotent-Replayed") != "true" || again.Status != final.Status || !bytes.Equal(again.Body, final.Body) {
		t.Fatalf("the final answer %d %s is not the recorded one: a replay gave %d %s",
			final.Status, final.Body, again.Status, again.Body)
	}
}

// assertNotFinal checks that an answer the service gave while its commit's
// answer was lost promises nothing: no 201, no 200.
func assertNotFinal(t *testing.T, r *apitest.Response, err error) {
	t.Helper()
	if err == nil && (r.Status == http.StatusCreated || r.Status == http.StatusOK) {
		t.Fatalf("a final answer %d %s while the database's answer was lost", r.Status, r.Body)
	}
}

// eventTypes lists the types of the account's events for one payment, as a
// feed consumer reads them; bearer "" is the Env's account.
func eventTypes(t *testing.T, e *apitest.Env, p *proc, id, bearer string) []string {
	t.Helper()
	e.FeedCaughtUp(t)
	r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/events?limit=100", BaseURL: p.url, Bearer: bearer})
	apitest.WantStatus(t, r, http.StatusOK)
	var page struct {
		Data []struct {
			Type    string `json:"type"`
			Payment struct {
				ID string `json:"id"`
			} `json:"payment"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range page.Data {
		if ev.Payment.ID == id {
			out = append(out, ev.Type)
		}
	}
	return out
}

// feedIDs lists the ids of the account's events for one payment.
func feedIDs(t *testing.T, e *apitest.Env, p *proc, id string) map[string]bool {
	t.Helper()
	e.FeedCaughtUp(t)
	r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/events?limit=100", BaseURL: p.url})
	apitest.WantStatus(t, r, http.StatusOK)
	var page struct {
		Data []struct {
			ID      string `json:"id"`
			Payment struct {
				ID string `json:"id"`
			} `json:"payment"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, ev := range page.Data {
		if ev.Payment.ID == id {
			out[ev.ID] = true
		}
	}
	return out
}

// wantDeliveredOnce waits until the merchant has every event of the
// payment, and checks it got each once: the outbox holds one job per
// event, whatever answers were lost.
func wantDeliveredOnce(t *testing.T, e *apitest.Env, p *proc, m *merchant, id string) {
	t.Helper()
	want := feedIDs(t, e, p, id)
	deadline := time.NewTimer(apitest.WaitTimeout)
	defer deadline.Stop()
	for {
		missing, changed := m.missing(want)
		if len(missing) == 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("events %v not delivered to the merchant", missing)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for ev := range want {
		if n := m.accepted[ev]; n != 1 {
			t.Fatalf("event %s delivered %d times, want once", ev, n)
		}
	}
}

// wantEvents checks a payment's events in the feed: each once, in order, as
// an undisturbed payment has them.
func wantEvents(t *testing.T, e *apitest.Env, p *proc, id string, want ...string) {
	t.Helper()
	if got := eventTypes(t, e, p, id, ""); !slices.Equal(got, want) {
		t.Fatalf("events of the payment = %v, want %v", got, want)
	}
}

// retryLong is retryUntilFinal for a client that waits out a reconciler's
// claim lease.
func retryLong(t *testing.T, e *apitest.Env, url, key string) *apitest.Response {
	t.Helper()
	for range 120 {
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: crashBody, BaseURL: url})
		if r.Status != http.StatusConflict && r.Status != http.StatusAccepted {
			return r
		}
		time.Sleep(250 * time.Millisecond) // the client's back-off
	}
	t.Fatalf("no final answer after 120 retries")
	return nil
}

// TestCommitAnswerLost loses the answer to the COMMIT of each transaction
// on a create's money path: the transaction happened, the service was not
// told. The client's retry, the lease and the reconciler must reach the
// state an undisturbed create reaches, with one authorization at the
// provider and no final answer the database does not hold.
func TestCommitAnswerLost(t *testing.T) {
	t.Parallel()

	// Reserve (transaction 1): the payment, attempt and key are written but
	// the service cannot know; nothing was sent to the provider. The retry
	// finds the key under its lease, then takes over the same attempt.
	t.Run("Reserve", func(t *testing.T) {
		t.Parallel()
		e, p, px := behindProxy(t)
		lost := px.DropCommitAnswer("-- name: PaymentInsertWithAttempt ", 1)
		r, err := create(e, p, "k-reserve")
		apitest.Recv(t, lost.Fired(), "the reserve's COMMIT answer to be dropped")
		assertNotFinal(t, r, err)
		if err == nil && (r.Status != http.StatusServiceUnavailable || r.Code(t) != "unavailable") {
			t.Fatalf("create with its reserve's answer lost: %d %s, want 503 unavailable", r.Status, r.Body)
		}
		final := retryUntilFinal(t, e, p.url, "k-reserve")
		assertOneCharge(t, e, final)
		assertRecorded(t, e, p, "k-reserve", final)
	})

	// Settle (transaction 2, with the events and the merchant webhook jobs
	// of the outcome): the settle is tried again, finds the key completed
	// and answers what it stored.
	t.Run("Settle", func(t *testing.T) {
		t.Parallel()
		e, p, px, m := behindProxyWithMerchant(t)
		lost := px.DropCommitAnswer("-- name: IdempotencyKeyComplete ", 1)
		r, err := create(e, p, "k-settle")
		apitest.Recv(t, lost.Fired(), "the settle's COMMIT answer to be dropped")
		if err != nil {
			t.Fatalf("create with its settle's answer lost: %v", err)
		}
		if r.Status != http.StatusCreated {
			assertNotFinal(t, r, err)
			r = retryUntilFinal(t, e, p.url, "k-settle")
		}
		assertOneCharge(t, e, r)
		assertRecorded(t, e, p, "k-settle", r)
		id := r.JSON(t)["id"].(string)
		wantEvents(t, e, p, id, "payment.processing", "payment.authorized")
		wantDeliveredOnce(t, e, p, m, id)
	})
}

// TestReconcilerCommitAnswerLost loses the answers to the reconciler's claim
// and to its resolution of an attempt in doubt: the attempt is resolved
// once, with one authorization at the provider, one event, and the client's
// key completed with the answer it replays.
func TestReconcilerCommitAnswerLost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, match string }{
		{"Claim", "-- name: AttemptScheduleClaim "},
		{"Resolve", "-- name: AttemptUpdateOutcomeWithPayment "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e, p, px := behindProxy(t, "RECONCILE_INTERVAL=100ms", "RECONCILE_AFTER=1s")
			// The authorization takes effect, its answer is lost (twice: Go's
			// transport re-sends a keyed POST once on a reused connection).
			drop := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
			lost := px.DropCommitAnswer(c.match, 1)
			r, err := create(e, p, "k-rec")
			if err != nil || r.Status != http.StatusAccepted {
				t.Fatalf("create with the provider's answer lost: %v %v, want 202", err, r)
			}
			drop.Remove()
			id := r.JSON(t)["id"].(string)
			apitest.Recv(t, lost.Fired(), "the reconciler's COMMIT answer to be dropped")
			// A claim holds the attempt for its whole lease, lost answer or
			// not: the client waits it out (409), then gets the outcome.
			final := retryLong(t, e, p.url, "k-rec")
			assertOneCharge(t, e, final)
			assertRecorded(t, e, p, "k-rec", final)
			wantEvents(t, e, p, id, "payment.processing", "payment.unknown", "payment.authorized")
		})
	}
}

// TestFeedReadLost: the events feed's read is one statement outside any
// transaction, so its lost answer is a lost request: the read is answered
// 503 and the consumer's retry from the same cursor gets the page.
func TestFeedReadLost(t *testing.T) {
	t.Parallel()
	e, p, px := behindProxy(t)
	r, err := create(e, p, "k-feed")
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("create: %v %v", err, r)
	}
	id := r.JSON(t)["id"].(string)
	e.FeedCaughtUp(t)
	lost := px.ResetOnStatement("-- name: EventListAfter ", 1)
	got := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/events?limit=100", BaseURL: p.url})
	apitest.Recv(t, lost.Fired(), "the feed's read to be lost")
	if got.Status != http.StatusServiceUnavailable || got.Code(t) != "unavailable" {
		t.Fatalf("feed read with its connection reset: %d %s, want 503 unavailable", got.Status, got.Body)
	}
	wantEvents(t, e, p, id, "payment.processing", "payment.authorized")
}

// TestDatabaseConnectionFaults: a connection reset in the middle of a
// transaction, a stall longer than DB_STATEMENT_TIMEOUT and a pooled
// connection broken while idle.
func TestDatabaseConnectionFaults(t *testing.T) {
	t.Parallel()

	// The reserve's transaction breaks before it commits: the server rolls
	// it back, the client gets 503 and its retry creates the payment anew.
	t.Run("ResetMidTransaction", func(t *testing.T) {
		t.Parallel()
		e, p, px := behindProxy(t)
		reset := px.ResetOnStatement("-- name: PaymentInsertWithAttempt ", 1)
		r, err := create(e, p, "k-reset")
		apitest.Recv(t, reset.Fired(), "the reserve's connection to be reset")
		if err != nil || r.Status != http.StatusServiceUnavailable || r.Code(t) != "unavailable" {
			t.Fatalf("create with its reserve reset: %v %v, want 503 unavailable", err, r)
		}
		if n := e.Sim.Stats().Authorizations; n != 0 {
			t.Fatalf("authorizations after a reserve rolled back = %d, want 0", n)
		}
		final := retryUntilFinal(t, e, p.url, "k-reset")
		assertOneCharge(t, e, final)
		assertRecorded(t, e, p, "k-reset", final)
	})

	// Every byte to and from the database waits (a stall) or is lost (a
	// blackhole) for longer than the statement timeout: the service answers
	// 503 unavailable within its own bounds, never holding the request past
	// HTTP_WRITE_TIMEOUT, and once it is over the retry completes the
	// payment.
	for _, fault := range []struct {
		name  string
		start func(*pgfault.Proxy)
	}{
		{"StallLongerThanStatementTimeout", func(px *pgfault.Proxy) { px.Stall(time.Hour) }},
		{"Blackhole", func(px *pgfault.Proxy) { px.Blackhole(time.Hour) }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			t.Parallel()
			e, p, px := behindProxy(t, "DB_STATEMENT_TIMEOUT=500ms", "HTTP_WRITE_TIMEOUT=5s")
			fault.start(px)
			got := e.DoAsync(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-stall", Body: crashBody, BaseURL: p.url})
			r := apitest.Await(t, got, "the create's answer while the database is unreachable")
			if r.Status != http.StatusServiceUnavailable || r.Code(t) != "unavailable" {
				t.Fatalf("create during a %s: %d %s, want 503 unavailable", fault.name, r.Status, r.Body)
			}
			px.Clear()
			final := retryUntilFinal(t, e, p.url, "k-stall")
			assertOneCharge(t, e, final)
			assertRecorded(t, e, p, "k-stall", final)
		})
	}

	// The pool's idle connections are broken without a word: the next
	// request still succeeds.
	t.Run("IdleConnectionBroken", func(t *testing.T) {
		t.Parallel()
		e, p, px := behindProxy(t)
		px.ResetAll()
		r, err := create(e, p, "k-idle")
		if err != nil {
			t.Fatal(err)
		}
		assertOneCharge(t, e, r)
		assertRecorded(t, e, p, "k-idle", r)
	})
}

// TestWebhookApplyCommitAnswerLost loses the answer to the COMMIT that
// applies a provider's event: the service answers the provider an error,
// the provider sends the event again, and the receipt already recorded
// makes the second delivery change nothing. The payment ends authorized
// once, with one authorization and each event once.
func TestWebhookApplyCommitAnswerLost(t *testing.T) {
	t.Parallel()
	e, p, px := behindProxy(t)
	stripeKey, secret := "sk_test_wh_"+apitest.SecretSuffix(t), "whsec_"+apitest.SecretSuffix(t)
	acct, apiKey, err := e.Accounts.Create(context.Background(), "Loja Webhook", stripeKey, secret)
	if err != nil {
		t.Fatal(err)
	}
	e.Sim.RegisterWebhookEndpoint(stripeKey, p.url+"/webhooks/stripe/"+acct.ID, secret)
	lost := px.DropCommitAnswer("-- name: ProviderEventReceiptInsert ", 1)
	// The authorization takes effect and its answer is lost (twice: Go's
	// transport re-sends a keyed POST once), so only the event tells.
	drop := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
	req := apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-wh", Body: crashBody, BaseURL: p.url, Bearer: apiKey}
	r := e.Do(req)
	if r.Status != http.StatusAccepted && r.Status != http.StatusCreated {
		t.Fatalf("create with the provider's answer lost: %d %s, want 202 or, told by the event, 201", r.Status, r.Body)
	}
	drop.Remove()
	id := r.JSON(t)["id"].(string)
	apitest.Recv(t, lost.Fired(), "the event's COMMIT answer to be dropped")
	ctx, cancel := context.WithTimeout(context.Background(), apitest.WaitTimeout)
	defer cancel()
	if err := e.Sim.WaitWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	var failed string
	for _, d := range e.Sim.WebhookDeliveries() {
		if d.Status < 200 || d.Status > 299 {
			failed = d.EventID
		}
	}
	if failed == "" {
		t.Fatalf("no delivery failed though its COMMIT's answer was lost: %+v", e.Sim.WebhookDeliveries())
	}
	if !e.Sim.Redeliver(failed) {
		t.Fatalf("event %s not found to send again", failed)
	}
	if err := e.Sim.WaitWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	ds := e.Sim.WebhookDeliveries()
	if last := ds[len(ds)-1]; last.EventID != failed || last.Status < 200 || last.Status > 299 {
		t.Fatalf("the event sent again was answered %+v", last)
	}
	var final *apitest.Response
	for range 40 {
		if final = e.Do(req); final.Status != http.StatusAccepted && final.Status != http.StatusConflict {
			break
		}
		time.Sleep(250 * time.Millisecond) // the client's back-off
	}
	assertOneCharge(t, e, final)
	again := e.Do(req)
	if again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, final.Body) {
		t.Fatalf("the final answer is not the recorded one: %d %s then %d %s", final.Status, final.Body, again.Status, again.Body)
	}
	types := eventTypes(t, e, p, id, apiKey)
	// Unknown first or not, as the event came before or after the create's
	// own recording; each once.
	if !slices.Equal(types, []string{"payment.processing", "payment.unknown", "payment.authorized"}) &&
		!slices.Equal(types, []string{"payment.processing", "payment.authorized"}) {
		t.Fatalf("events of the payment = %v, want each once, ending authorized", types)
	}
}
