package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/notify"
	"github.com/riverqueue/river/rivertype"
)

// eventJobs counts the delivery jobs of one event.
func eventJobs(t *testing.T, e *apitest.Env, eventID string) int {
	t.Helper()
	n := 0
	for _, j := range e.WebhookJobs(t) {
		var a notify.DeliverArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			t.Fatal(err)
		}
		if a.EventID == eventID {
			n++
		}
	}
	return n
}

func TestWebhookQueueBounds(t *testing.T) {
	t.Parallel()

	t.Run("RedeliverWhileADeliveryWaitsAddsNothing", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
		var eps []string
		for i := range 3 {
			eps = append(eps, createEndpoint(t, e, fmt.Sprint("k-ep-", i), "http://127.0.0.1:1/h", "payment.authorized")["id"].(string))
		}
		apitest.WantStatus(t, e.Create("k-pay", apitest.CreateBody("pedido-redeliver", 2000)), http.StatusCreated)
		var eventID string
		for _, ev := range allEvents(t, e, "") {
			if ev.Type == "payment.authorized" {
				eventID = ev.ID
			}
		}
		if n := eventJobs(t, e, eventID); n != 3 {
			t.Fatalf("%d jobs for the event, want 3", n)
		}
		for range 300 {
			apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/events/" + eventID + "/redeliver"}), http.StatusAccepted)
		}
		n := eventJobs(t, e, eventID)
		t.Logf("300 redelivers × 3 endpoints: %d delivery jobs for the event in river_job", n)
		if n != 3 {
			t.Fatalf("%d jobs for the event after 300 redelivers while the deliveries wait, want 3", n)
		}
		// Once a delivery is done, a redeliver sends it again, once.
		job := webhookJobsFor(t, e, eps[0])[0]
		if _, err := e.DB.Pool.Exec(t.Context(), `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id = $1`, job.ID); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/events/" + eventID + "/redeliver"}), http.StatusAccepted)
		}
		if jobs := webhookJobsFor(t, e, eps[0]); len(jobs) != 2 || jobs[1].State != rivertype.JobStateAvailable {
			t.Fatalf("after a completed delivery, two redelivers left %d jobs, want 2 (one new)", len(jobs))
		}
		if n := eventJobs(t, e, eventID); n != 4 {
			t.Fatalf("%d jobs for the event, want 4", n)
		}
		// A delivery being attempted stands in for a redeliver too.
		if _, err := e.DB.Pool.Exec(t.Context(), `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = $1`,
			webhookJobsFor(t, e, eps[1])[0].ID); err != nil {
			t.Fatal(err)
		}
		apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/events/" + eventID + "/redeliver"}), http.StatusAccepted)
		if jobs := webhookJobsFor(t, e, eps[1]); len(jobs) != 1 {
			t.Fatalf("a redeliver while the delivery runs left %d jobs, want 1", len(jobs))
		}
	})

	t.Run("AnAccountHasAtMost16Endpoints", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
		accepted, refused := 0, 0
		var last *apitest.Response
		for i := range 100 {
			r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: fmt.Sprint("k-many-", i),
				Body: `{"url":"http://127.0.0.1:1/h","enabled_events":["*"]}`})
			switch r.Status {
			case http.StatusCreated:
				accepted++
			case http.StatusConflict:
				refused++
				last = r
			default:
				t.Fatalf("create %d: %d %s", i, r.Status, r.Body)
			}
		}
		t.Logf("100 endpoint creates: %d accepted, %d refused", accepted, refused)
		if accepted != notify.MaxEndpoints || last.Code(t) != "limit_exceeded" {
			t.Fatalf("%d of 100 accepted, want %d, the rest 409 limit_exceeded", accepted, notify.MaxEndpoints)
		}
		var count int
		if err := e.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_endpoints WHERE deleted_at IS NULL`).Scan(&count); err != nil {
			t.Fatal(err)
		}
		if count != notify.MaxEndpoints {
			t.Fatalf("%d endpoint rows, want %d", count, notify.MaxEndpoints)
		}
		// A retry of an accepted creation still replays it.
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: "k-many-15",
			Body: `{"url":"http://127.0.0.1:1/h","enabled_events":["*"]}`})
		if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay of the 16th: %d %s", r.Status, r.Body)
		}
		// A deleted endpoint frees its place.
		id := r.JSON(t)["id"].(string)
		apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodDelete, Path: "/v1/webhook_endpoints/" + id}), http.StatusOK)
		createEndpoint(t, e, "k-after-delete", "http://127.0.0.1:1/h", "*")
	})

	t.Run("ConcurrentCreatesAt15AcceptOne", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
		for i := range notify.MaxEndpoints - 1 {
			createEndpoint(t, e, fmt.Sprint("k-ep-", i), "http://127.0.0.1:1/h", "*")
		}
		const racers = 8
		outcomes := make([]<-chan apitest.Outcome, racers)
		for i := range racers {
			outcomes[i] = e.DoAsync(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: fmt.Sprint("k-race-", i),
				Body: `{"url":"http://127.0.0.1:1/h","enabled_events":["*"]}`})
		}
		statuses := make([]int, racers)
		for i, ch := range outcomes {
			statuses[i] = apitest.Await(t, ch, "a concurrent endpoint create").Status
		}
		accepted := 0
		for _, s := range statuses {
			if s == http.StatusCreated {
				accepted++
			} else if s != http.StatusConflict {
				t.Fatalf("statuses %v", statuses)
			}
		}
		t.Logf("%d concurrent creates at 15 endpoints: %d accepted", racers, accepted)
		if accepted != 1 {
			t.Fatalf("%d concurrent creates at 15 endpoints: %d accepted, want 1", racers, accepted)
		}
	})
}
