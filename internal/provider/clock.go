package provider

import (
	"sync"
	"time"
)

// Clock is what the service knows of a provider's clock: the Date of the
// provider's latest answer against this clock's reading when it came. A
// provider forgets a key by its own clock, so a re-send is safe only while
// that clock, too, is inside the key's window.
type Clock struct {
	now    func() time.Time
	mu     sync.Mutex
	offset time.Duration
}

// NewClock reads this side's time from now (time.Now when nil).
func NewClock(now func() time.Time) *Clock {
	if now == nil {
		now = time.Now
	}
	return &Clock{now: now}
}

// Observe takes the time an answer said it was sent (its Date header,
// which the adapter's transport reads: reach.Dated).
func (c *Clock) Observe(t time.Time) {
	local := c.now()
	c.mu.Lock()
	c.offset = t.Sub(local)
	c.mu.Unlock()
}

// Ahead is how far the provider's clock ran ahead of this one at its
// latest answer; zero when behind or never seen. A Date has whole seconds,
// so up to a second of it is noise.
func (c *Clock) Ahead() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.offset-time.Second, 0)
}

// Clocked is a provider that watches its clock through its answers.
type Clocked interface {
	Clock() *Clock
}
