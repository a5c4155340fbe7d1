package apitest

import (
	"context"
	"testing"
	"time"
)

// FeedCaughtUp waits until the events feed serves everything committed
// before the call: until every transaction running at the call has ended,
// so the feed's horizon (the oldest running transaction, over the whole
// server) has passed it. Tests of other packages on the same server hold
// the horizon too, for as long as their transactions run.
func (e *Env) FeedCaughtUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	next, err := e.DB.NextXid(ctx)
	if err != nil {
		t.Fatalf("read the transaction horizon: %v", err)
	}
	for {
		oldest, err := e.DB.OldestXid(ctx)
		if err != nil {
			t.Fatalf("waiting for the feed's horizon to pass xid %d: %v", next, err)
		}
		if oldest >= next {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the feed's horizon did not pass xid %d within %v", next, WaitTimeout)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
