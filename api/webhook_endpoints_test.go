package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/notify"
	"github.com/acmepay/payments/internal/payment"
	"github.com/riverqueue/river/rivertype"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// receiver is a merchant's endpoint that fails its first failures calls.
type receiver struct {
	mu       sync.Mutex
	failures int
	got      []*http.Request
	bodies   [][]byte
	// took, when set, hears of every request answered 2xx.
	took chan<- string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.got = append(rc.got, r)
	rc.bodies = append(rc.bodies, b)
	if len(rc.got) <= rc.failures {
		http.Error(w, "not now", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok")
	if rc.took != nil {
		rc.took <- r.Header.Get("webhook-id")
	}
}

func createEndpoint(t *testing.T, e *apitest.Env, key, url string, events ...string) map[string]any {
	t.Helper()
	ev, _ := json.Marshal(events)
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: key,
		Body: fmt.Sprintf(`{"url":%q,"enabled_events":%s}`, url, ev)})
	apitest.WantStatus(t, r, http.StatusCreated)
	return r.JSON(t)
}

func webhookJobsFor(t *testing.T, e *apitest.Env, endpointID string) []*rivertype.JobRow {
	t.Helper()
	var out []*rivertype.JobRow
	for _, j := range e.WebhookJobs(t) {
		var a notify.DeliverArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			t.Fatal(err)
		}
		if a.EndpointID == endpointID {
			out = append(out, j)
		}
	}
	return out
}

func TestWebhookEndpoints(t *testing.T) {
	t.Parallel()

	t.Run("RefusesNonPublicAddresses", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		for i, u := range []string{"https://127.0.0.1/h", "https://10.0.0.1/h", "https://169.254.169.254/latest",
			"https://[::1]/h", "https://localhost/h", "https://100.64.0.1/h", "https://[fe80::1]/h",
			"https://[::ffff:127.0.0.1]/h", "http://93.184.216.34/h"} {
			r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: fmt.Sprint("k-ssrf-", i),
				Body: fmt.Sprintf(`{"url":%q,"enabled_events":["*"]}`, u)})
			if r.Status != http.StatusBadRequest || r.Code(t) != "invalid_request" {
				t.Errorf("%s: %d %s, want 400 invalid_request", u, r.Status, r.Body)
			}
		}
		// Public and https: accepted (no request is made at creation).
		createEndpoint(t, e, "k-public", "https://93.184.216.34/h", "*")
	})

	t.Run("AllowPrivateLiftsTheCheck", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
		createEndpoint(t, e, "k-local", "http://127.0.0.1:1/h", "*")
	})

	t.Run("TheDialerRefusesWhatTheCheckMissed", func(t *testing.T) {
		t.Parallel()
		// A name that resolved to a public address at the check and now
		// resolves to loopback (DNS rebinding): the dialer checks the
		// address it connects to.
		srv := httptest.NewServer(&receiver{})
		t.Cleanup(srv.Close)
		_, err := notify.Guard{}.Client(time.Second).Post(srv.URL, "application/json", strings.NewReader("{}"))
		if !errors.Is(err, notify.ErrAddressRefused) {
			t.Fatalf("post to %s: %v, want ErrAddressRefused", srv.URL, err)
		}
	})

	t.Run("CreateListGetUpdateDeleteAndReplay", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		body := `{"url":"https://93.184.216.34/h","enabled_events":["payment.captured"],"description":"orders"}`
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: "k-1", Body: body})
		apitest.WantStatus(t, r, http.StatusCreated)
		ep := r.JSON(t)
		id, secret := ep["id"].(string), ep["secret"].(string)
		if !strings.HasPrefix(id, "we_") || !strings.HasPrefix(secret, "whsec_") || ep["status"] != "enabled" {
			t.Fatalf("created = %s", r.Body)
		}
		again := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: "k-1", Body: body})
		apitest.WantStatus(t, again, http.StatusCreated)
		if again.JSON(t)["id"] != id || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay = %s", again.Body)
		}
		other := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: "k-1",
			Body: `{"url":"https://93.184.216.34/other","enabled_events":["*"]}`})
		if other.Status != http.StatusUnprocessableEntity {
			t.Fatalf("same key, other body: %d %s", other.Status, other.Body)
		}
		got := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/webhook_endpoints/" + id})
		apitest.WantStatus(t, got, http.StatusOK)
		if _, shown := got.JSON(t)["secret"]; shown {
			t.Fatalf("GET shows the secret: %s", got.Body)
		}
		list := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/webhook_endpoints"})
		if data := list.JSON(t)["data"].([]any); len(data) != 1 {
			t.Fatalf("list = %s", list.Body)
		}
		up := e.Do(apitest.Request{Method: http.MethodPatch, Path: "/v1/webhook_endpoints/" + id, Body: `{"enabled":false}`})
		apitest.WantStatus(t, up, http.StatusOK)
		if up.JSON(t)["status"] != "disabled" {
			t.Fatalf("update = %s", up.Body)
		}
		del := e.Do(apitest.Request{Method: http.MethodDelete, Path: "/v1/webhook_endpoints/" + id})
		apitest.WantStatus(t, del, http.StatusOK)
		apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/webhook_endpoints/" + id}), http.StatusNotFound)
		// Another account never sees it.
		_, otherKey := e.CreateAccount("Loja Dois", "sk_test_"+apitest.SecretSuffix(t)+"b")
		apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/webhook_endpoints/" + id, Bearer: otherKey}), http.StatusNotFound)
	})
}

func TestWebhookDelivery(t *testing.T) {
	t.Parallel()

	t.Run("RetriesUntilTheReceiverTakesItWithTheSameIDAndAValidSignature", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
		rc := &receiver{failures: 3}
		srv := httptest.NewServer(rc)
		t.Cleanup(srv.Close)
		ep := createEndpoint(t, e, "k-ep", srv.URL, "payment.authorized")
		r := e.Create("k-pay", apitest.CreateBody("pedido-hook", 2000))
		apitest.WantStatus(t, r, http.StatusCreated)
		pay := r.JSON(t)

		jobs := webhookJobsFor(t, e, ep["id"].(string))
		if len(jobs) != 1 {
			t.Fatalf("%d jobs, want 1 (payment.authorized only)", len(jobs))
		}
		job := jobs[0]
		for attempt := 1; ; attempt++ {
			failedAt := e.Clock.Now()
			res, err := e.WorkWebhookJob(t, job)
			job = res.Job
			if attempt <= rc.failures {
				if err == nil || job.State != rivertype.JobStateRetryable {
					t.Fatalf("attempt %d: err %v, state %s; want a retry", attempt, err, job.State)
				}
				// Exponential backoff with jitter; the first retry within 30 s.
				wait := job.ScheduledAt.Sub(failedAt)
				lo, hi := notify.Backoff(attempt), notify.Backoff(attempt)*3/2
				if wait < lo-time.Second || wait > hi+time.Second || (attempt == 1 && wait > 30*time.Second) {
					t.Fatalf("attempt %d: next in %v, want %v…%v", attempt, wait, lo, hi)
				}
				e.Clock.Advance(wait)
				continue
			}
			if err != nil || job.State != rivertype.JobStateCompleted {
				t.Fatalf("attempt %d: err %v, state %s; want completed", attempt, err, job.State)
			}
			break
		}
		if job.MaxAttempts != notify.MaxAttempts {
			t.Fatalf("max attempts = %d, want %d", job.MaxAttempts, notify.MaxAttempts)
		}

		wh, err := standardwebhooks.NewWebhook(ep["secret"].(string))
		if err != nil {
			t.Fatal(err)
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if len(rc.got) != 4 {
			t.Fatalf("receiver got %d requests, want 4", len(rc.got))
		}
		var eventID string
		for i, req := range rc.got {
			id := req.Header.Get("webhook-id")
			if i == 0 {
				eventID = id
			}
			if id != eventID || !strings.HasPrefix(id, "evt_") {
				t.Fatalf("request %d: webhook-id %q, want the same event id %q", i, id, eventID)
			}
			if err := wh.VerifyIgnoringTimestamp(rc.bodies[i], req.Header); err != nil {
				t.Fatalf("request %d: signature: %v", i, err)
			}
		}
		var ev struct {
			ID      string         `json:"id"`
			Type    string         `json:"type"`
			Cursor  string         `json:"cursor"`
			Payment map[string]any `json:"payment"`
		}
		if err := json.Unmarshal(rc.bodies[3], &ev); err != nil {
			t.Fatal(err)
		}
		if ev.ID != eventID || ev.Type != "payment.authorized" || ev.Cursor == "" || ev.Payment["id"] != pay["id"] {
			t.Fatalf("delivered %s", rc.bodies[3])
		}
		if v, ok := ev.Payment["version"].(float64); !ok || v < 2 {
			t.Fatalf("payment version = %v, want ≥ 2 (created, then authorized)", ev.Payment["version"])
		}
		// The cursor is the event's place in the feed.
		page := decodePage(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/events?after=" + ev.Cursor}))
		for _, fe := range page.Data {
			if fe.ID == eventID {
				t.Fatalf("the feed after the delivered cursor still has the event")
			}
		}

		// Deliveries: four attempts, three retrying then one success, by
		// endpoint and by event.
		for _, path := range []string{"/v1/webhook_endpoints/" + ep["id"].(string) + "/deliveries", "/v1/events/" + eventID + "/deliveries"} {
			r := e.Do(apitest.Request{Method: http.MethodGet, Path: path})
			apitest.WantStatus(t, r, http.StatusOK)
			var l struct {
				Data []struct {
					Outcome    string `json:"outcome"`
					StatusCode *int   `json:"status_code"`
					Response   string `json:"response"`
				} `json:"data"`
			}
			if err := json.Unmarshal(r.Body, &l); err != nil {
				t.Fatal(err)
			}
			var outcomes []string
			for _, a := range l.Data {
				outcomes = append(outcomes, fmt.Sprint(a.Outcome, ":", *a.StatusCode))
			}
			if got := strings.Join(outcomes, " "); got != "retrying:503 retrying:503 retrying:503 succeeded:200" {
				t.Fatalf("%s: %s", path, got)
			}
		}

		// Redeliver enqueues it again, same event id.
		rd := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/events/" + eventID + "/redeliver"})
		apitest.WantStatus(t, rd, http.StatusAccepted)
		if n := len(webhookJobsFor(t, e, ep["id"].(string))); n != 2 {
			t.Fatalf("%d jobs after redeliver, want 2", n)
		}
		apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/events/evt_nope/redeliver"}), http.StatusNotFound)
	})

	t.Run("TheRiverWorkerDeliversOnItsOwn", func(t *testing.T) {
		t.Parallel()
		// Behind PgBouncer (TEST_POOLER=pgbouncer) the worker runs poll-only
		// through the pooler, as serve does without a direct URL.
		e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
		took := make(chan string, 10)
		srv := httptest.NewServer(&receiver{took: took})
		t.Cleanup(srv.Close)
		ep := createEndpoint(t, e, "k-ep", srv.URL, "payment.authorized")
		e.StartRiverWorker(t)
		apitest.WantStatus(t, e.Create("k-pay", apitest.CreateBody("pedido-river", 2000)), http.StatusCreated)
		id := apitest.Recv(t, took, "the River worker's delivery")
		if !strings.HasPrefix(id, "evt_") {
			t.Fatalf("webhook-id = %q", id)
		}
		deadline := time.Now().Add(apitest.WaitTimeout)
		for {
			jobs := webhookJobsFor(t, e, ep["id"].(string))
			if len(jobs) == 1 && jobs[0].State == rivertype.JobStateCompleted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the delivery job is not completed: %+v", jobs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("DuringARotationBothSecretsSign", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
		rc := &receiver{}
		srv := httptest.NewServer(rc)
		t.Cleanup(srv.Close)
		ep := createEndpoint(t, e, "k-ep", srv.URL, "*")
		rot := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints/" + ep["id"].(string) + "/rotate_secret", Key: "k-rot"})
		apitest.WantStatus(t, rot, http.StatusOK)
		newSecret := rot.JSON(t)["secret"].(string)
		if newSecret == ep["secret"] {
			t.Fatal("rotation kept the secret")
		}
		apitest.WantStatus(t, e.Create("k-pay", apitest.CreateBody("pedido-rot", 2000)), http.StatusCreated)
		jobs := webhookJobsFor(t, e, ep["id"].(string))
		if len(jobs) == 0 {
			t.Fatal("no delivery job")
		}
		if _, err := e.WorkWebhookJob(t, jobs[0]); err != nil {
			t.Fatal(err)
		}
		rc.mu.Lock()
		req, body := rc.got[0], rc.bodies[0]
		rc.mu.Unlock()
		if n := len(strings.Fields(req.Header.Get("webhook-signature"))); n != 2 {
			t.Fatalf("webhook-signature has %d entries, want 2", n)
		}
		for _, s := range []string{ep["secret"].(string), newSecret} {
			wh, _ := standardwebhooks.NewWebhook(s)
			// Verify one entry at a time: each must match its own secret.
			for _, entry := range strings.Fields(req.Header.Get("webhook-signature")) {
				h := req.Header.Clone()
				h.Set("webhook-signature", entry)
				if wh.VerifyIgnoringTimestamp(body, h) == nil {
					goto verified
				}
			}
			t.Fatalf("no entry verifies with secret %.10s…", s)
		verified:
		}
		// After 24 h only the new secret signs.
		e.Clock.Advance(notify.RotationOverlap + time.Minute)
		if _, err := e.WorkWebhookJob(t, jobs[1]); err != nil {
			t.Fatal(err)
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if n := len(strings.Fields(rc.got[1].Header.Get("webhook-signature"))); n != 1 {
			t.Fatalf("after the overlap webhook-signature has %d entries, want 1", n)
		}
	})

	t.Run("ARolledBackChangeEnqueuesNothing", func(t *testing.T) {
		t.Parallel()
		failing := &failAfterEnqueue{}
		e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true, WrapStore: func(s payment.Store) payment.Store {
			failing.Store = s
			return failing
		}})
		ep := createEndpoint(t, e, "k-ep", "http://127.0.0.1:1/h", "*")
		failing.on.Store(true)
		r := e.Create("k-pay", apitest.CreateBody("pedido-rollback", 2000))
		if r.Status < 500 {
			t.Fatalf("create with a failing commit: %d %s", r.Status, r.Body)
		}
		if failing.enqueued.Load() == 0 {
			t.Fatal("the event was never enqueued: the test proves nothing")
		}
		if jobs := webhookJobsFor(t, e, ep["id"].(string)); len(jobs) != 0 {
			t.Fatalf("%d jobs after a rollback, want 0", len(jobs))
		}
	})
}

// failAfterEnqueue fails every transaction right after it enqueued a
// delivery, so that transaction rolls back.
type failAfterEnqueue struct {
	payment.Store
	on       atomic.Bool
	enqueued atomic.Int64
}

func (s *failAfterEnqueue) WithTx(ctx context.Context, fn func(payment.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx payment.Tx) error {
		if !s.on.Load() {
			return fn(tx)
		}
		return fn(&enqueueThenFail{Tx: tx, s: s})
	})
}

type enqueueThenFail struct {
	payment.Tx
	s *failAfterEnqueue
}

func (t *enqueueThenFail) WebhooksEnqueue(ctx context.Context, e payment.Event) error {
	if err := t.Tx.WebhooksEnqueue(ctx, e); err != nil {
		return err
	}
	t.s.enqueued.Add(1)
	return errors.New("injected failure after the enqueue")
}

func TestWebhookEndpointSameURL(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
	const url = "http://127.0.0.1:9/hooks"
	first := createEndpoint(t, e, "we-same-1", url, "*")
	if got := first["same_url_endpoints"]; fmt.Sprint(got) != "[]" {
		t.Fatalf("first endpoint: same_url_endpoints = %v, want []", got)
	}
	second := createEndpoint(t, e, "we-same-2", url, "payment.captured")
	if got := fmt.Sprint(second["same_url_endpoints"]); got != fmt.Sprintf("[%s]", first["id"]) {
		t.Fatalf("second endpoint: same_url_endpoints = %s, want [%s]", got, first["id"])
	}
	if other := createEndpoint(t, e, "we-same-3", url+"/other", "*"); fmt.Sprint(other["same_url_endpoints"]) != "[]" {
		t.Fatalf("another URL: same_url_endpoints = %v", other["same_url_endpoints"])
	}
	// Reads never carry it; a deleted endpoint no longer counts.
	got := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/webhook_endpoints/" + first["id"].(string)})
	if _, ok := got.JSON(t)["same_url_endpoints"]; ok {
		t.Fatalf("a read carries same_url_endpoints: %s", got.Body)
	}
	apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodDelete, Path: "/v1/webhook_endpoints/" + first["id"].(string)}), http.StatusOK)
	third := createEndpoint(t, e, "we-same-4", url, "*")
	if got := fmt.Sprint(third["same_url_endpoints"]); got != fmt.Sprintf("[%s]", second["id"]) {
		t.Fatalf("after a delete: same_url_endpoints = %s, want [%s]", got, second["id"])
	}
}
