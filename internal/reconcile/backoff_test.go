package reconcile_test

import (
	"testing"
	"time"

	"github.com/acmepay/payments/internal/reconcile"
)

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	const after, maxBackoff = 15 * time.Second, time.Hour
	for _, c := range []struct {
		tries  int
		jitter float64
		want   time.Duration
	}{
		// The full pause (jitter near 1) doubles from RECONCILE_AFTER...
		{1, 1, 15 * time.Second},
		{2, 1, 30 * time.Second},
		{3, 1, time.Minute},
		{8, 1, 32 * time.Minute},
		// ...until RECONCILE_MAX_BACKOFF, however many tries.
		{9, 1, time.Hour},
		{40, 1, time.Hour},
		{1 << 30, 1, time.Hour},
		// Jitter takes off up to half of it.
		{1, 0, 7500 * time.Millisecond},
		{3, 0.5, 45 * time.Second},
		{40, 0, 30 * time.Minute},
		// Nonsense tries count as the first.
		{0, 1, 15 * time.Second},
		{-3, 1, 15 * time.Second},
	} {
		if got := reconcile.Backoff(c.tries, after, maxBackoff, c.jitter); got != c.want {
			t.Errorf("Backoff(%d, jitter %v) = %v, want %v", c.tries, c.jitter, got, c.want)
		}
	}
	// RECONCILE_AFTER=0 (tests, drills): no pause at all.
	if got := reconcile.Backoff(5, 0, maxBackoff, 1); got != 0 {
		t.Errorf("Backoff with after 0 = %v, want 0", got)
	}
}
