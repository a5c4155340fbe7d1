package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// client sends creates over keep-alive connections, one per concurrent
// caller, like a checkout frontend's pool.
type client struct {
	http   *http.Client
	base   string
	apiKey string
	// created counts 201s that were not replays: each must be exactly one
	// authorization at the provider.
	created *atomic.Int64
}

func newClient(base, apiKey string, created *atomic.Int64) *client {
	tr := &http.Transport{
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &client{http: &http.Client{Transport: tr, Timeout: 30 * time.Second}, base: base, apiKey: apiKey, created: created}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// Labels of the answers a workload expects.
const (
	labelNew      = "201 new"
	labelReplayed = "201 replayed"
	labelInUse    = "409 idempotency_key_in_use"
)

// createBody is a checkout's create: manual capture, so an accepted card
// ends authorized.
func createBody(order string) string {
	return fmt.Sprintf(`{"order_id":%q,"amount":1999,"currency":"BRL","payment_method":"pm_card_visa",`+
		`"capture_method":"manual","description":"paybench order","metadata":{"cart_id":%q}}`, order, order)
}

// create POSTs /v1/payments and labels the answer: "201 new", "201
// replayed", or the status with the problem's code.
func (c *client) create(key, body string) (label string, respBody []byte) {
	req, err := http.NewRequest(http.MethodPost, c.base+"/v1/payments", strings.NewReader(body))
	if err != nil {
		return "request error", nil
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.http.Do(req)
	if err != nil {
		return "transport error", nil
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "transport error", nil
	}
	replayed := resp.Header.Get("Idempotent-Replayed") == "true"
	switch {
	case resp.StatusCode == http.StatusCreated && replayed:
		return labelReplayed, b
	case resp.StatusCode == http.StatusCreated:
		c.created.Add(1)
		return labelNew, b
	}
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(b, &p)
	if p.Code == "" {
		p.Code = "no code"
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, p.Code), b
}

// keys makes idempotency keys and order ids unique within a run.
type keys struct {
	prefix string
	n      atomic.Int64
}

func (k *keys) next(tag string) string {
	return fmt.Sprintf("%s-%s-%d", k.prefix, tag, k.n.Add(1))
}

// step is one measured load step.
type step struct {
	Workload string
	Clients  int
	// Conns is what the ceiling actually ran with when it had to differ
	// from Clients (pgbench is capped by max_connections).
	Conns    int
	N        int
	Errors   int
	Elapsed  time.Duration
	P50      time.Duration
	P95      time.Duration
	P99      time.Duration
	Outcomes map[string]int
	PeakRSS  int64
	CPU      cpuUse
	// Rate is the offered rate of an open-loop step.
	Rate float64
	Note string
}

// Throughput is completed requests (or pgbench creates) per second.
func (s step) Throughput() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.N) / s.Elapsed.Seconds()
}

// tally is one worker's share of a step, merged at the end.
type tally struct {
	lat      []time.Duration
	outcomes map[string]int
	errors   int
}

func (t *tally) add(d time.Duration, label string, ok bool) {
	t.lat = append(t.lat, d)
	if t.outcomes == nil {
		t.outcomes = map[string]int{}
	}
	t.outcomes[label]++
	if !ok {
		t.errors++
	}
}

func merge(workload string, clients int, elapsed time.Duration, ts []*tally) step {
	s := step{Workload: workload, Clients: clients, Elapsed: elapsed, Outcomes: map[string]int{}}
	var all []time.Duration
	for _, t := range ts {
		all = append(all, t.lat...)
		s.Errors += t.errors
		for k, v := range t.outcomes {
			s.Outcomes[k] += v
		}
	}
	s.N = len(all)
	slices.Sort(all)
	s.P50, s.P95, s.P99 = percentile(all, 0.50), percentile(all, 0.95), percentile(all, 0.99)
	return s
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// request is one call of a workload: its answer's label and whether that
// answer is the one expected.
type request func(worker int) (label string, ok bool)

// closedLoop runs clients callers, each sending its next request as soon as
// the previous one is answered, for d.
func closedLoop(workload string, clients int, d time.Duration, do request) step {
	ts := make([]*tally, clients)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range clients {
		ts[w] = &tally{}
		wg.Go(func() {
			for time.Now().Before(deadline) {
				t0 := time.Now()
				label, ok := do(w)
				ts[w].add(time.Since(t0), label, ok)
			}
		})
	}
	wg.Wait()
	return merge(workload, clients, time.Since(start), ts)
}

// openLoop offers rate requests per second for d, whatever the answers'
// latency, through up to workers callers. Latency counts from when a request
// was due, so time spent queued behind slow answers is not hidden.
func openLoop(workload string, rate float64, workers int, d time.Duration, do request) step {
	n := int(rate * d.Seconds())
	due := make(chan time.Time, n)
	ts := make([]*tally, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		ts[w] = &tally{}
		wg.Go(func() {
			for t := range due {
				label, ok := do(w)
				ts[w].add(time.Since(t), label, ok)
			}
		})
	}
	interval := time.Duration(float64(time.Second) / rate)
	for i := range n {
		t := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(t))
		due <- t
	}
	close(due)
	wg.Wait()
	s := merge(workload, workers, time.Since(start), ts)
	s.Rate = rate
	return s
}

// burstLoop sends rounds of clients identical requests at once (the same
// new key and body), for d. Exactly one request of a round may create the
// payment; the others must be answered 409 in use or, once it completed, by
// its replay.
func burstLoop(workload string, clients int, d time.Duration, round func() (key, body string), c *client) step {
	ts := make([]*tally, clients)
	for w := range ts {
		ts[w] = &tally{}
	}
	start := time.Now()
	deadline := start.Add(d)
	rounds, badRounds := 0, 0
	for time.Now().Before(deadline) {
		key, body := round()
		var wg sync.WaitGroup
		var created atomic.Int32
		gate := make(chan struct{})
		for w := range clients {
			wg.Go(func() {
				<-gate
				t0 := time.Now()
				label, _ := c.create(key, body)
				ok := label == labelNew || label == labelReplayed || label == labelInUse
				if label == labelNew {
					created.Add(1)
				}
				ts[w].add(time.Since(t0), label, ok)
			})
		}
		close(gate)
		wg.Wait()
		rounds++
		if created.Load() != 1 {
			badRounds++
		}
	}
	s := merge(workload, clients, time.Since(start), ts)
	s.Errors += badRounds
	s.Note = fmt.Sprintf("%d rounds", rounds)
	if badRounds > 0 {
		s.Note += fmt.Sprintf(", %d without exactly one new payment", badRounds)
	}
	return s
}
