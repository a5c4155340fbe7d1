package provider

import (
	"testing"
	"time"
)

func TestClockAhead(t *testing.T) {
	local := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	c := NewClock(func() time.Time { return local })
	if got := c.Ahead(); got != 0 {
		t.Fatalf("Ahead before any answer = %v, want 0", got)
	}
	c.Observe(local.Add(2 * time.Hour))
	if got := c.Ahead(); got != 2*time.Hour-time.Second {
		t.Fatalf("Ahead = %v, want 2h less a second of Date's rounding", got)
	}
	c.Observe(local.Add(-time.Hour))
	if got := c.Ahead(); got != 0 {
		t.Fatalf("Ahead of a provider behind = %v, want 0", got)
	}
}
