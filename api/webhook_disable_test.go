package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/notify"
	"github.com/riverqueue/river/rivertype"
)

// failingEndpoint is an env with one endpoint, taking payment.authorized,
// whose receiver fails every call until told otherwise.
type failingEndpoint struct {
	e  *apitest.Env
	rc *receiver
	id string
	n  int
}

func newFailingEndpoint(t *testing.T) *failingEndpoint {
	t.Helper()
	e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
	rc := &receiver{failures: 1 << 30}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return &failingEndpoint{e: e, rc: rc, id: createEndpoint(t, e, "k-ep", srv.URL, "payment.authorized")["id"].(string)}
}

// pay authorizes a payment and returns the delivery job it enqueued.
func (f *failingEndpoint) pay(t *testing.T) *rivertype.JobRow {
	t.Helper()
	f.n++
	before := len(webhookJobsFor(t, f.e, f.id))
	apitest.WantStatus(t, f.e.Create("k-pay-"+string(rune('a'+f.n)), apitest.CreateBody("pedido-"+string(rune('a'+f.n)), 2000)), http.StatusCreated)
	jobs := webhookJobsFor(t, f.e, f.id)
	if len(jobs) != before+1 {
		t.Fatalf("%d delivery jobs after a payment, want %d", len(jobs), before+1)
	}
	return jobs[len(jobs)-1]
}

// attempt works one attempt at the job's scheduled time (the clock moves
// there first) and returns the job after it.
func (f *failingEndpoint) attempt(t *testing.T, job *rivertype.JobRow) *rivertype.JobRow {
	t.Helper()
	if wait := job.ScheduledAt.Sub(f.e.Clock.Now()); wait > 0 {
		f.e.Clock.Advance(wait)
	}
	res, _ := f.e.WorkWebhookJob(t, job) // a failure is the point
	return res.Job
}

func (f *failingEndpoint) status(t *testing.T) string {
	t.Helper()
	r := f.e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/webhook_endpoints/" + f.id})
	apitest.WantStatus(t, r, http.StatusOK)
	return r.JSON(t)["status"].(string)
}

func (f *failingEndpoint) calls() int {
	f.rc.mu.Lock()
	defer f.rc.mu.Unlock()
	return len(f.rc.got)
}

func TestWebhookEndpointDisabling(t *testing.T) {
	t.Parallel()

	t.Run("ADeliveryRetriedForThreeDaysIsFailedAndAnEndpointFailingForFiveDaysIsDisabled", func(t *testing.T) {
		t.Parallel()
		f := newFailingEndpoint(t)
		before := scrapeMetrics(t, f.e)
		start := f.e.Clock.Now()

		// The first delivery: every attempt fails for 3 days, and the
		// last one, no earlier, marks it failed.
		job := f.pay(t)
		firstAt := f.e.Clock.Now()
		for job.State != rivertype.JobStateCancelled {
			if job.State != rivertype.JobStateAvailable && job.State != rivertype.JobStateRetryable {
				t.Fatalf("attempt %d left the job %s", job.Attempt, job.State)
			}
			job = f.attempt(t, job)
		}
		attempts := job.Attempt
		if took := f.e.Clock.Now().Sub(firstAt); took < notify.RetryFor || took > notify.RetryFor+time.Minute {
			t.Fatalf("the delivery was retried for %v, want %v", took, notify.RetryFor)
		}
		r := f.e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/webhook_endpoints/" + f.id + "/deliveries?limit=100"})
		apitest.WantStatus(t, r, http.StatusOK)
		var l struct {
			Data []struct {
				Outcome string `json:"outcome"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Data) != attempts || l.Data[len(l.Data)-1].Outcome != notify.OutcomeFailed || l.Data[0].Outcome != notify.OutcomeRetrying {
			t.Fatalf("deliveries = %s, want %d attempts, the last failed", r.Body, attempts)
		}
		// Three days of failures are not five.
		if got := f.status(t); got != notify.StatusEnabled {
			t.Fatalf("after 3 days of failures status = %s, want enabled", got)
		}

		// Later deliveries keep failing (the merchant keeps taking
		// payments); once the streak passes 5 days the endpoint is disabled.
		// spare waits untouched until then.
		failed := 1
		spare := f.pay(t)
		job = f.pay(t)
		for f.status(t) == notify.StatusEnabled {
			if f.e.Clock.Now().Sub(start) > 2*notify.DisableAfter {
				t.Fatalf("still enabled after %v of failures", f.e.Clock.Now().Sub(start))
			}
			if job.State == rivertype.JobStateCancelled {
				failed++
				job = f.pay(t)
			}
			job = f.attempt(t, job)
		}
		if job.State == rivertype.JobStateCancelled {
			failed++
		}
		disabledAt := f.e.Clock.Now()
		if since := disabledAt.Sub(start); since < notify.DisableAfter {
			t.Fatalf("disabled after %v of failures, want at least %v", since, notify.DisableAfter)
		}
		if got := f.status(t); got != notify.StatusDisabled {
			t.Fatalf("status = %s, want disabled", got)
		}

		// The event carries the endpoint, not a payment.
		var disabled []feedEvent
		for _, ev := range allEvents(t, f.e, "") {
			if ev.Type == "webhook_endpoint.disabled" {
				disabled = append(disabled, ev)
			}
		}
		if len(disabled) != 1 {
			t.Fatalf("%d webhook_endpoint.disabled events, want 1", len(disabled))
		}
		if disabled[0].Payment != nil || disabled[0].WebhookEndpoint["id"] != f.id || disabled[0].WebhookEndpoint["status"] != notify.StatusDisabled {
			t.Fatalf("disabled event = %+v, want the endpoint and no payment", disabled[0])
		}
		if _, shown := disabled[0].WebhookEndpoint["secret"]; shown {
			t.Fatal("the disabled event shows the secret")
		}

		// Deliveries stop: the pending one is canceled without a call, and
		// a new event enqueues nothing for this endpoint.
		calls := f.calls()
		if job := f.attempt(t, spare); job.State != rivertype.JobStateCancelled {
			t.Fatalf("the pending delivery is %s after the disabling, want cancelled", job.State)
		}
		jobs := len(webhookJobsFor(t, f.e, f.id))
		apitest.WantStatus(t, f.e.Create("k-pay-after", apitest.CreateBody("pedido-after", 2000)), http.StatusCreated)
		if n := len(webhookJobsFor(t, f.e, f.id)); n != jobs {
			t.Fatalf("%d delivery jobs after a payment to a disabled endpoint, want %d", n, jobs)
		}
		if got := f.calls(); got != calls {
			t.Fatalf("the receiver got %d more calls after the disabling", got-calls)
		}
		after := scrapeMetrics(t, f.e)
		moved(t, before, after, 1, "payments_webhook_endpoints_disabled", "reason", "failing")
		moved(t, before, after, float64(failed), "payments_webhook_endpoint_deliveries_total", "outcome", "failed")
		moved(t, before, after, 1, "payments_webhook_endpoint_deliveries_total", "outcome", "canceled")
	})

	t.Run("ASuccessInBetweenRestartsTheStreak", func(t *testing.T) {
		t.Parallel()
		f := newFailingEndpoint(t)
		start := f.e.Clock.Now()
		f.attempt(t, f.pay(t)) // fails: the streak starts

		// Day 3: one delivery goes through.
		f.e.Clock.Advance(3 * 24 * time.Hour)
		f.rc.mu.Lock()
		f.rc.failures = 0
		f.rc.mu.Unlock()
		if job := f.attempt(t, f.pay(t)); job.State != rivertype.JobStateCompleted {
			t.Fatalf("delivery on day 3 is %s, want completed", job.State)
		}
		f.rc.mu.Lock()
		f.rc.failures = 1 << 30
		f.rc.mu.Unlock()

		// Days 3 to 6: failures again, past 5 days after the first one but
		// not 5 days after the success.
		f.e.Clock.Advance(time.Hour)
		job := f.pay(t)
		for f.e.Clock.Now().Sub(start) < notify.DisableAfter+24*time.Hour {
			if job.State == rivertype.JobStateCancelled {
				job = f.pay(t)
			}
			job = f.attempt(t, job)
		}
		if job.State == rivertype.JobStateCompleted {
			t.Fatalf("the last delivery is %s, want still failing", job.State)
		}
		if got := f.status(t); got != notify.StatusEnabled {
			t.Fatalf("status = %s, want enabled: the success on day 3 restarted the streak", got)
		}
	})
}

// TestWebhookRetriesForThreeDays runs with the shortest waits, which make
// the most attempts: whatever their number, a delivery is retried for 3
// days after its first attempt.
func TestWebhookRetriesForThreeDays(t *testing.T) {
	t.Parallel()
	newEndpoint := func(t *testing.T) *failingEndpoint {
		f := newFailingEndpoint(t)
		f.e.WebhookWorker.Jitter = func() float64 { return 0 }
		return f
	}

	t.Run("AnEndpointDownForTwoAndAHalfDaysStillGetsTheEvent", func(t *testing.T) {
		t.Parallel()
		f := newEndpoint(t)
		job := f.attempt(t, f.pay(t))
		firstAt := f.e.Clock.Now()
		for job.ScheduledAt.Sub(firstAt) < 60*time.Hour {
			if job.State != rivertype.JobStateRetryable {
				t.Fatalf("after %v of failures (attempt %d) the job is %s, want retryable",
					f.e.Clock.Now().Sub(firstAt), job.Attempt, job.State)
			}
			job = f.attempt(t, job)
		}
		f.rc.mu.Lock()
		f.rc.failures = 0
		f.rc.mu.Unlock()
		calls := f.calls()
		if job = f.attempt(t, job); job.State != rivertype.JobStateCompleted {
			t.Fatalf("the endpoint is back after %v: the job is %s, want completed", f.e.Clock.Now().Sub(firstAt), job.State)
		}
		if got := f.calls(); got != calls+1 {
			t.Fatalf("the receiver got %d calls when back, want 1", got-calls)
		}
	})

	t.Run("AnEndpointDownForMoreThanThreeDaysFailsOnlyAfter72Hours", func(t *testing.T) {
		t.Parallel()
		f := newEndpoint(t)
		job := f.pay(t)
		for job.State == rivertype.JobStateAvailable || job.State == rivertype.JobStateRetryable {
			job = f.attempt(t, job)
		}
		r := f.e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/webhook_endpoints/" + f.id + "/deliveries?limit=100"})
		apitest.WantStatus(t, r, http.StatusOK)
		var l struct {
			Data []struct {
				Outcome string    `json:"outcome"`
				At      time.Time `json:"at"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Data) == 0 {
			t.Fatal("no attempts listed")
		}
		took := l.Data[len(l.Data)-1].At.Sub(l.Data[0].At)
		if job.State != rivertype.JobStateCancelled || took < notify.RetryFor {
			t.Fatalf("the delivery ended %s after %d attempts, %v after the first; want ended by the service, no earlier than %v",
				job.State, job.Attempt, took, notify.RetryFor)
		}
		if n := len(l.Data); n != job.Attempt || l.Data[n-1].Outcome != notify.OutcomeFailed || f.calls() != n {
			t.Fatalf("%d attempts listed, %d calls, job attempt %d; want every attempt made and the last failed: %s",
				n, f.calls(), job.Attempt, r.Body)
		}
	})
}
