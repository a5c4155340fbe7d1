package operations

import (
	"context"
	"sync"
	"time"
)

// tokenBucket paces calls to rate per second with bursts of up to burst,
// on the wall clock: the provider's rate limits are about real time.
type tokenBucket struct {
	rate  float64 // tokens per second; 0 means no limit
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newTokenBucket(rate float64, burst int) *tokenBucket {
	if burst < 1 {
		burst = 1
	}
	return &tokenBucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// wait takes one token, sleeping until one is there or ctx ends.
func (b *tokenBucket) wait(ctx context.Context) error {
	if b.rate <= 0 {
		return ctx.Err()
	}
	b.mu.Lock()
	now := time.Now()
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	b.tokens--
	// A negative balance is the wait this caller owes; later callers queue
	// behind it.
	delay := time.Duration(-b.tokens / b.rate * float64(time.Second))
	b.mu.Unlock()
	if delay <= 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
