package chaos

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Bounds of one provider outage: long enough that creates meet it and a
// circuit may open, short enough that the run goes on.
const (
	minOutage = 2 * time.Second
	maxOutage = 5 * time.Second
)

// outages takes one provider down at a time behind its front at the
// simulator: every dial refused (a proof that nothing was sent, which
// fails a create over to the other provider) or accepted and never
// answered (a doubt, which never fails over). The simulator's own faults
// add the 5xx and the revoked credentials.
type outages struct {
	simURL string
	http   *http.Client

	mu    sync.Mutex
	count map[string]int // "stripe refused", …
	down  time.Duration
}

func newOutages(simURL string) *outages {
	return &outages{simURL: simURL, http: &http.Client{Timeout: 30 * time.Second}, count: map[string]int{}}
}

// run starts an outage a mean of every apart until ctx is done; every
// front is up again before it returns, even when ctx ends mid-outage.
func (o *outages) run(ctx context.Context, every time.Duration, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x0ff1))
	fronts, kinds := []string{"stripe", "mercadopago"}, []string{"refused", "silent"}
	for {
		sleep(ctx, every/2+time.Duration(rng.Int64N(int64(every))))
		if ctx.Err() != nil {
			return nil
		}
		front, kind := fronts[rng.IntN(len(fronts))], kinds[rng.IntN(len(kinds))]
		hold := minOutage + time.Duration(rng.Int64N(int64(maxOutage-minOutage)))
		start := time.Now()
		err := simControl(ctx, o.http, http.MethodPost, o.simURL+"/_sim/outages", map[string]string{"front": front, "outage": kind})
		if err == nil {
			sleep(ctx, hold)
		}
		// The outage may have begun before an error: always end it.
		if uerr := o.up(front); uerr != nil || (err != nil && ctx.Err() == nil) {
			return firstErr(err, uerr)
		}
		o.mu.Lock()
		o.count[front+" "+kind]++
		o.down += time.Since(start)
		o.mu.Unlock()
	}
}

func (o *outages) up(front string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return simControl(ctx, o.http, http.MethodPost, o.simURL+"/_sim/outages", map[string]string{"front": front, "outage": "up"})
}

func (o *outages) snapshot() (map[string]int, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]int, len(o.count))
	for k, v := range o.count {
		out[k] = v
	}
	return out, o.down
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// circuitOpenings counts the circuits the replicas opened, from their logs.
func (r *runner) circuitOpenings() (int, error) {
	files, err := filepath.Glob(filepath.Join(r.logDir, "replica-*.log"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			if bytes.Contains(l, []byte(`"msg":"provider circuit"`)) && bytes.Contains(l, []byte(`"to":"open"`)) {
				n++
			}
		}
	}
	return n, nil
}
