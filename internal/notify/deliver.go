package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/logging"
	"github.com/riverqueue/river"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// DeliverArgs is one delivery: an event to an endpoint. The job carries
// ids only; the body is read at each attempt.
type DeliverArgs struct {
	AccountID  string `json:"account_id"`
	EndpointID string `json:"endpoint_id"`
	EventID    string `json:"event_id"`
}

// Kind names the job in River's tables.
func (DeliverArgs) Kind() string { return "webhook_delivery" }

// Queue is River's queue of deliveries.
const Queue = "webhooks"

// Timing of deliveries (CONTRACT §13).
const (
	// Timeout bounds one attempt.
	Timeout = 10 * time.Second
	// JobTimeout bounds one run of the job: the attempt with room for the
	// address check and the database reads and writes around it.
	JobTimeout = Timeout + 20*time.Second
	// RescueAfter is when a job still running is taken as cut short by a
	// crash and is retried. Longer than JobTimeout, so a live attempt is
	// never taken; River's own default (1 h) would hold a delivery cut by
	// a crash for an hour.
	RescueAfter = JobTimeout + 10*time.Second
	// RetryFor is how long a delivery is retried before it is failed.
	RetryFor = 3 * 24 * time.Hour
	// DisableAfter is how long an endpoint may fail every delivery before
	// it is disabled.
	DisableAfter = 5 * 24 * time.Hour
	// firstRetry is the base of the backoff: the first retry comes within
	// 30 s of the failure, jitter included.
	firstRetry = 20 * time.Second
	// maxBackoff caps one wait, so the 3 days hold enough attempts.
	maxBackoff = 6 * time.Hour
	// responseExcerpt is how much of an answer's body is kept.
	responseExcerpt = 1024
)

// Backoff is the wait before retry n (1 for the first retry), jitter
// excluded: 20 s, 40 s, 80 s, … up to 6 h.
func Backoff(n int) time.Duration {
	d := float64(firstRetry) * math.Pow(2, float64(n-1))
	if d > float64(maxBackoff) {
		return maxBackoff
	}
	return time.Duration(d)
}

// Retry is the schedule of a delivery first attempted at first, after its
// attempt n (1 for the first) failed at at: when to try next, or false when
// the delivery is over. The wait is Backoff(n) plus a jitter of j (0 to 1)
// times half of it, so the first retry comes within 30 s; the last attempt
// is made RetryFor after the first, whatever the jitter, and a delivery is
// over only once an attempt that late has failed.
func Retry(first, at time.Time, n int, j float64) (time.Time, bool) {
	end := first.Add(RetryFor)
	if !at.Before(end) {
		return time.Time{}, false
	}
	d := Backoff(n)
	next := at.Add(d + time.Duration(min(max(j, 0), 1)*float64(d/2)))
	if next.After(end) {
		next = end
	}
	return next, true
}

// mostAttempts is the most attempts Retry makes: every wait the shortest.
var mostAttempts = func() int {
	first := time.Unix(0, 0)
	at, n := first, 1
	for {
		next, ok := Retry(first, at, n, 0)
		if !ok {
			return n
		}
		at, n = next, n+1
	}
}()

// MaxAttempts is River's bound on attempts. A delivery ends by time
// (Retry), never by this bound: it leaves room for attempts cut short by
// crashes, which River counts too, and only stops a job that never
// finishes an attempt.
var MaxAttempts = 4 * mostAttempts

// metaFirstAttempt is the job metadata key of the first attempt's time.
const metaFirstAttempt = "first_attempt_at"

// firstAttempt is when the job's first attempt was made, as its metadata
// keeps it; false before the first attempt has been recorded.
func firstAttempt(job *river.Job[DeliverArgs]) (time.Time, bool) {
	var m struct {
		At *time.Time `json:"first_attempt_at"`
	}
	if job.Metadata == nil || json.Unmarshal(job.Metadata, &m) != nil || m.At == nil {
		return time.Time{}, false
	}
	return *m.At, true
}

// Target is what the worker needs to reach one endpoint for one event.
type Target struct {
	Endpoint *Endpoint
	EventID  string
	// PaymentID is the event's payment; "" for an endpoint's own events.
	PaymentID string
	// Body is the event as the feed serves it, plus its cursor.
	Body []byte
}

// DeliveryStore is what the worker needs.
type DeliveryStore interface {
	// DeliveryTarget reads the endpoint (deleted ones too) and the event.
	DeliveryTarget(ctx context.Context, a DeliverArgs) (Target, error)
	// AttemptRecord stores one attempt and updates the endpoint's failing
	// streak: a success clears it, a failure starts it if none runs. A
	// failure whose streak began before disableBefore disables the
	// endpoint and writes its webhook_endpoint.disabled event.
	AttemptRecord(ctx context.Context, a Attempt, disableBefore time.Time) error
}

// Metrics counts attempts by outcome: an Outcome, or refused or canceled.
type Metrics interface {
	WebhookEndpointDelivery(outcome string)
}

// Metric outcomes beside the attempt outcomes.
const (
	// MetricRefused is an attempt the address guard refused.
	MetricRefused = "refused"
	// MetricCanceled is a delivery dropped because its endpoint is
	// disabled or deleted.
	MetricCanceled = "canceled"
)

// Worker delivers one event to one endpoint per attempt.
type Worker struct {
	river.WorkerDefaults[DeliverArgs]
	Store DeliveryStore
	Seal  Sealer
	Guard Guard
	Now   func() time.Time
	// Metrics, when set, counts attempts.
	Metrics Metrics
	// Log, when set, gets one line per attempt.
	Log *slog.Logger
	// Jitter, when set, is the jitter share of the next wait (0 to 1);
	// random otherwise.
	Jitter func() float64
	client *http.Client
}

// NewWorker checks its dependencies.
func NewWorker(store DeliveryStore, seal Sealer, guard Guard, now func() time.Time) (*Worker, error) {
	if store == nil || seal == nil {
		return nil, errors.New("notify: worker store and sealer are required")
	}
	if now == nil {
		now = time.Now
	}
	return &Worker{Store: store, Seal: seal, Guard: guard, Now: now, client: guard.Client(Timeout)}, nil
}

// NextRetry is the exponential backoff with jitter. A job rescued after a
// crash is retried at once: its failure was noticed RescueAfter late.
func (w *Worker) NextRetry(job *river.Job[DeliverArgs]) time.Time {
	now := w.Now()
	// River's clock, not the worker's: the rescuer compares attempted_at
	// with the wall clock.
	if job.AttemptedAt != nil && time.Since(*job.AttemptedAt) >= RescueAfter {
		return now
	}
	j := rand.Float64()
	if w.Jitter != nil {
		j = w.Jitter()
	}
	first, known := firstAttempt(job)
	if !known {
		first = now
	}
	if next, ok := Retry(first, now, job.Attempt, j); ok {
		return next
	}
	// Over by time, yet not ended by Work (an error before the attempt):
	// the next attempt ends it.
	return now.Add(firstRetry)
}

// logAttempt writes the attempt's line; the answer's excerpt stays in the
// stored attempt, where the merchant sees it, and out of the logs.
func (w *Worker) logAttempt(ctx context.Context, job *river.Job[DeliverArgs], a Attempt) {
	if w.Log == nil {
		return
	}
	level := slog.LevelInfo
	if a.Outcome != OutcomeSucceeded {
		level = slog.LevelWarn
	}
	w.Log.LogAttrs(ctx, level, "webhook delivery", slog.String("endpoint_id", a.EndpointID),
		slog.String("event_id", a.EventID), slog.Int("try", job.Attempt), slog.Int("status", a.StatusCode),
		slog.String("outcome", a.Outcome), slog.Duration("duration", a.Duration))
}

// Timeout leaves River room around the HTTP timeout.
func (w *Worker) Timeout(*river.Job[DeliverArgs]) time.Duration { return JobTimeout }

// errGone ends a delivery that no longer has a destination.
var errGone = errors.New("endpoint deleted or disabled")

// Work makes one attempt. An error makes River retry; the failed attempt
// that ends a delivery (RetryFor after its first) cancels the job, so River
// never decides on its own that it is over. The attempt is recorded either
// way.
func (w *Worker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	t, err := w.Store.DeliveryTarget(ctx, job.Args)
	if err != nil {
		return err
	}
	if t.Endpoint.Status != StatusEnabled {
		w.count(MetricCanceled)
		return river.JobCancel(errGone)
	}
	// At the database's precision, so the stored attempts show the same
	// times the give-up was decided on.
	start := w.Now().UTC().Truncate(time.Microsecond)
	first, known := firstAttempt(job)
	if !known {
		first = start
		// Merged into the job's row whatever the attempt's outcome. Outside
		// River (no work context) there is nowhere to keep it.
		_ = river.MetadataSet(ctx, metaFirstAttempt, start.UTC())
	}
	ctx = logging.WithPayment(ctx, job.Args.AccountID, t.PaymentID)
	code, excerpt, sendErr := w.send(ctx, t, start)
	a := Attempt{AccountID: job.Args.AccountID, EndpointID: job.Args.EndpointID, EventID: job.Args.EventID,
		At: start.UTC(), StatusCode: code, Duration: w.Now().Sub(start), Response: excerpt, Outcome: OutcomeSucceeded}
	if sendErr != nil {
		a.Outcome = OutcomeRetrying
		if _, again := Retry(first, start, job.Attempt, 0); !again || job.Attempt >= job.MaxAttempts {
			a.Outcome = OutcomeFailed
		}
	}
	if err := w.Store.AttemptRecord(ctx, a, start.Add(-DisableAfter)); err != nil {
		return err
	}
	w.logAttempt(ctx, job, a)
	if errors.As(sendErr, new(refusedError)) {
		w.count(MetricRefused)
	} else {
		w.count(a.Outcome)
	}
	if a.Outcome == OutcomeFailed && job.Attempt < job.MaxAttempts {
		return river.JobCancel(sendErr)
	}
	return sendErr
}

func (w *Worker) count(outcome string) {
	if w.Metrics != nil {
		w.Metrics.WebhookEndpointDelivery(outcome)
	}
}

// refusedError is an attempt the address guard stopped: the URL resolves
// to a non-public address now.
type refusedError struct{ error }

func (e refusedError) Unwrap() error { return e.error }

// send makes the request; a non-2xx answer is an error.
func (w *Worker) send(ctx context.Context, t Target, at time.Time) (int, string, error) {
	// DNS may have changed since creation; the dialer checks the address
	// actually connected as well.
	if err := w.Guard.CheckURL(ctx, t.Endpoint.URL); errors.Is(err, errUnresolved) {
		return 0, "refused: " + err.Error(), err
	} else if err != nil {
		return 0, "refused: " + err.Error(), refusedError{err}
	}
	sig, err := w.sign(t, at)
	if err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Endpoint.URL, bytes.NewReader(t.Body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "acmepay-webhooks/1")
	req.Header.Set(standardwebhooks.HeaderWebhookID, eventID(t))
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	resp, err := w.client.Do(req)
	if err != nil {
		if errors.Is(err, ErrAddressRefused) {
			return 0, "refused: " + ErrAddressRefused.Error(), refusedError{err}
		}
		return 0, "no answer", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, responseExcerpt))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	excerpt := strings.ToValidUTF8(string(b), "\uFFFD")
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, excerpt, fmt.Errorf("endpoint answered %d", resp.StatusCode)
	}
	return resp.StatusCode, excerpt, nil
}

// sign signs with the current secret and, during a rotation, the previous
// one too: space-separated entries, as Standard Webhooks has it.
func (w *Worker) sign(t Target, at time.Time) (string, error) {
	encs := [][]byte{t.Endpoint.SecretEnc}
	if t.Endpoint.PreviousSecretEnc != nil && t.Endpoint.PreviousExpiresAt != nil && at.Before(*t.Endpoint.PreviousExpiresAt) {
		encs = append(encs, t.Endpoint.PreviousSecretEnc)
	}
	var sigs []string
	for _, enc := range encs {
		secret, err := w.Seal.Open(enc)
		if err != nil {
			return "", err
		}
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return "", err
		}
		s, err := wh.Sign(eventID(t), at, t.Body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, s)
	}
	return strings.Join(sigs, " "), nil
}

// eventID is the webhook-id: the event's id, the same on every retry.
func eventID(t Target) string { return t.EventID }
