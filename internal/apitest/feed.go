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
	var next uint64
	if err := e.DB.Pool.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())`).Scan(&next); err != nil {
		t.Fatalf("read the transaction horizon: %v", err)
	}
	for {
		var passed bool
		err := e.DB.Pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::xid8`, next).Scan(&passed)
		if err != nil {
			t.Fatalf("waiting for the feed's horizon to pass xid %d: %v", next, err)
		}
		if passed {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the feed's horizon did not pass xid %d within %v", next, WaitTimeout)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
