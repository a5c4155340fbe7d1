package notify

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

func TestNextRetry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := &Worker{Now: func() time.Time { return now }}
	job := func(attemptedAgo time.Duration) *river.Job[DeliverArgs] {
		at := time.Now().Add(-attemptedAgo)
		return &river.Job[DeliverArgs]{JobRow: &rivertype.JobRow{Attempt: 1, AttemptedAt: &at}}
	}
	if got := w.NextRetry(job(time.Second)).Sub(now); got < Backoff(1) || got > Backoff(1)*3/2 {
		t.Errorf("a failed attempt is retried in %v, want %v…%v", got, Backoff(1), Backoff(1)*3/2)
	}
	// The rescuer takes a job only after RescueAfter: its attempt was cut
	// short by a crash, noticed late already.
	if got := w.NextRetry(job(RescueAfter + time.Second)); !got.Equal(now) {
		t.Errorf("a rescued job is retried at %v, want at once (%v)", got, now)
	}
	if RescueAfter <= JobTimeout || JobTimeout <= Timeout {
		t.Errorf("RescueAfter %v, JobTimeout %v, Timeout %v: each must exceed the next", RescueAfter, JobTimeout, Timeout)
	}
}

// TestRetrySchedule walks the schedule for every kind of jitter: the
// first retry within 30 s, the last attempt no earlier than RetryFor after
// the first (and not later, when River runs each on time), and River's
// MaxAttempts never reached first.
func TestRetrySchedule(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	jitters := map[string]func(n int) float64{
		"none":        func(int) float64 { return 0 },
		"half":        func(int) float64 { return 0.5 },
		"largest":     func(int) float64 { return 1 },
		"alternating": func(n int) float64 { return float64(n % 2) },
		"random":      func(int) float64 { return rng.Float64() },
	}
	for name, jitter := range jitters {
		for run := range 50 {
			first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			at, n := first, 1
			for {
				next, ok := Retry(first, at, n, jitter(n))
				if !ok {
					break
				}
				if !next.After(at) {
					t.Fatalf("%s: attempt %d at %v, then %v", name, n, at, next)
				}
				if n == 1 && next.Sub(at) > 30*time.Second {
					t.Fatalf("%s: the first retry comes %v after the failure, want within 30 s", name, next.Sub(at))
				}
				at, n = next, n+1
			}
			if last := at.Sub(first); last != RetryFor {
				t.Fatalf("%s run %d: the last attempt is %v after the first, want %v", name, run, last, RetryFor)
			}
			if n >= MaxAttempts {
				t.Fatalf("%s: %d attempts reach MaxAttempts %d: River would end the delivery", name, n, MaxAttempts)
			}
		}
	}
	// A late queue (the attempt made after its time) is still the last
	// one only once RetryFor has passed.
	first := time.Unix(0, 0)
	if _, ok := Retry(first, first.Add(RetryFor-time.Second), 20, 1); !ok {
		t.Error("an attempt before RetryFor ends the delivery")
	}
	if _, ok := Retry(first, first.Add(RetryFor+time.Hour), 20, 0); ok {
		t.Error("an attempt after RetryFor does not end the delivery")
	}
}
