package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

// watcher polls what is left of each job's pass, from the database, and
// each backlog account's provider calls, from the simulator.
type watcher struct {
	r     *backlogRun
	begin time.Time

	mu       sync.Mutex
	left     [4]int64
	ended    [4]time.Time
	calls    map[string]int
	svcCalls float64
	polled   bool
}

var watchedJobs = [4]string{"reconcile unknown", "poll waiting Pix", "purge responses", "delete tombstones"}

func newWatcher(r *backlogRun, begin time.Time) *watcher {
	return &watcher{r: r, begin: begin}
}

// run polls every second until the returned stop is called.
func (w *watcher) run(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			w.poll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return func() {
		cancel()
		<-done
		w.poll(context.Background())
	}
}

func (w *watcher) poll(ctx context.Context) {
	now := time.Now()
	var left [4]int64
	err := w.r.db.QueryRow(ctx, query("BacklogProgress"), w.begin, now.Add(-72*time.Hour), now.Add(-9600*time.Hour)).
		Scan(&left[0], &left[1], &left[2], &left[3])
	if err != nil {
		if ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "paybench: backlog progress: %v\n", err)
		}
		return
	}
	calls, err := simRequests(w.r.simBase)
	if err != nil {
		fmt.Fprintf(os.Stderr, "paybench: simulator stats: %v\n", err)
		return
	}
	svc := serviceProviderCalls(w.r.svcBase)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.left, w.calls, w.svcCalls, w.polled = left, calls, svc, true
	for i, n := range left {
		if n == 0 && w.ended[i].IsZero() {
			w.ended[i] = now
		}
	}
}

// done tells whether every pass has ended.
func (w *watcher) done() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.ended {
		if e.IsZero() {
			return false
		}
	}
	return w.polled
}

func (w *watcher) results() []passResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	items := [4]int{w.r.bc.unknown, w.r.bc.waiting, w.r.bc.expiredKeys / 2, w.r.bc.expiredKeys - w.r.bc.expiredKeys/2}
	keys := [4]string{w.r.unknownKey, w.r.pixKey}
	var out []passResult
	for i, job := range watchedJobs {
		p := passResult{job: job, items: items[i], left: int(w.left[i]), finished: !w.ended[i].IsZero()}
		p.duration = time.Since(w.begin)
		if p.finished {
			p.duration = w.ended[i].Sub(w.begin)
		}
		if keys[i] != "" {
			p.calls = w.calls[keys[i]]
		}
		out = append(out, p)
	}
	// One reconciler works both backlogs under one pace, the older due
	// times first: its whole pass is the figure to compare with the rate.
	both := passResult{job: "reconciler, both", items: out[0].items + out[1].items, left: out[0].left + out[1].left,
		duration: max(out[0].duration, out[1].duration), calls: out[0].calls + out[1].calls,
		finished: out[0].finished && out[1].finished}
	out = append(out[:2], append([]passResult{both}, out[2:]...)...)
	fmt.Fprintf(w.r.out, "\npayments_provider_calls_total of the first instance over the jobs phase (its API creates included): %.0f\n", w.svcCalls)
	return out
}
