package notify

import (
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
