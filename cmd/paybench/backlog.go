package main

// The backlog mode measures the background jobs over a backlog seeded with
// SQL: payments left unknown by a provider outage (the reconciler looks each
// one up), Pix payments waiting for the customer (polled), and idempotency
// keys past every retention window (purged). For each job it prints how long
// its pass took and how many provider calls a minute it made, and the API's
// create latency at a fixed rate without the jobs and while they run.
//
//	go run ./cmd/paybench backlog [-unknown 100000] [-waiting 100000] [-expired-keys 100000]
//	    [-rate 50] [-load 30s] [-watch 5m] [-reconcile-rate 20] [-replicas 1]

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

type backlogConfig struct {
	unknown, waiting, expiredKeys int
	rate                          float64
	load, watch                   time.Duration
	reconcileRate                 string
	replicas                      int
}

func parseBacklogFlags(args []string, stderr io.Writer) (config, backlogConfig, error) {
	fs := flag.NewFlagSet("paybench backlog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("DATABASE_URL")
	if def == "" {
		def = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	c := config{duration: time.Second, ceilings: false}
	var bc backlogConfig
	fs.StringVar(&c.adminURL, "database-url", def, "a PostgreSQL URL with the right to create databases (env DATABASE_URL)")
	fs.IntVar(&c.seedTenants, "seed-tenants", 1000, "other tenants with settled history")
	fs.IntVar(&c.seedPayments, "seed-payments", 100_000, "settled past payments of those tenants")
	fs.BoolVar(&c.keep, "keep", false, "keep the bench database (its name is printed)")
	fs.IntVar(&bc.unknown, "unknown", 100_000, "payments left unknown by a provider outage, due for reconciliation")
	fs.IntVar(&bc.waiting, "waiting", 100_000, "Pix payments waiting for the customer, due for their poll")
	fs.IntVar(&bc.expiredKeys, "expired-keys", 100_000, "idempotency keys past the retention windows (half responses, half tombstones)")
	fs.Float64Var(&bc.rate, "rate", 50, "API creates per second offered during each latency window")
	fs.DurationVar(&bc.load, "load", 30*time.Second, "length of each latency window")
	fs.DurationVar(&bc.watch, "watch", 5*time.Minute, "how long to wait for the jobs' passes to finish")
	fs.StringVar(&bc.reconcileRate, "reconcile-rate", "", "RECONCILE_RATE for the service (empty: its default)")
	fs.IntVar(&bc.replicas, "replicas", 1, "instances of payments serve running the jobs on the one database")
	if err := fs.Parse(args); err != nil {
		return c, bc, err
	}
	if bc.rate <= 0 || bc.load < time.Second || bc.replicas < 1 || min(bc.unknown, bc.waiting, bc.expiredKeys) < 0 {
		return c, bc, errors.New("backlog: -rate must be positive, -load at least 1s, -replicas at least 1, the sizes not negative")
	}
	if c.seedPayments > 0 && c.seedTenants < 1 {
		return c, bc, errors.New("-seed-payments needs -seed-tenants of at least 1")
	}
	c.workloads = map[string]bool{}
	return c, bc, nil
}

// backlogRun is the backlog mode's state beside the bench's.
type backlogRun struct {
	*bench
	bc                   backlogConfig
	unknownKey, pixKey   string // the simulator keys of the backlog's accounts
	unknownAcct, pixAcct string
	replicas             []*proc
}

// jobsOff keeps every job but the start-up purge from running: the
// baseline. The purge finds nothing then, as the expired keys come later.
var jobsOff = []string{"RECONCILE_INTERVAL=1000h", "PURGE_INTERVAL=1000h", "AUDIT_INTERVAL=1000h"}

func runBacklog(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, bc, err := parseBacklogFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	b := &bench{cfg: cfg, out: stdout, cores: runtime.NumCPU(), created: &atomic.Int64{}}
	b.keys.prefix = "bl" + randomHex(4)
	r := &backlogRun{bench: b, bc: bc}
	defer func() {
		for _, p := range r.replicas {
			p.stop()
		}
		b.cleanup()
	}()
	b.serveEnv = jobsOff
	b.beforeServe = r.seedBacklog
	started := time.Now()
	if err := b.setup(ctx); err != nil {
		return err
	}
	fmt.Fprintf(b.out, "paybench backlog: %d unknown, %d waiting Pix, %d expired keys; settled history %d payments of %d tenants\n",
		bc.unknown, bc.waiting, bc.expiredKeys, cfg.seedPayments, cfg.seedTenants)
	fmt.Fprintf(b.out, "postgres %s; %d cores; load average before %s; seeded in %s\n",
		b.settings, b.cores, b.loadAvg, b.seeded.Round(time.Millisecond))
	base := r.apiWindow()
	if _, err := b.db.Exec(ctx, query("BacklogExpiredKeys"), bc.expiredKeys, b.acctID); err != nil {
		return fmt.Errorf("seed expired keys: %w", err)
	}
	b.vacuum(ctx)
	passes, withJobs, err := r.jobsPhase(ctx)
	if err != nil {
		return err
	}
	r.report(base, withJobs, passes)
	fmt.Fprintf(b.out, "\ntotal %s\n", time.Since(started).Round(time.Second))
	return nil
}

// seedBacklog creates the backlog's two accounts (one for the unknown
// payments, one for the waiting ones, so the simulator counts each job's
// calls apart) and seeds their payments.
func (r *backlogRun) seedBacklog(ctx context.Context) error {
	bin := filepath.Join(r.dir, "payments")
	r.unknownKey, r.pixKey = "sk_test_unknown_"+randomHex(8), "sk_test_pix_"+randomHex(8)
	var err error
	if r.unknownAcct, _, err = createAccountWithKey(ctx, bin, r.env, r.unknownKey); err != nil {
		return err
	}
	if r.pixAcct, _, err = createAccountWithKey(ctx, bin, r.env, r.pixKey); err != nil {
		return err
	}
	t := time.Now()
	steps := []struct {
		q    string
		args []any
	}{
		{"BacklogUnknownPayments", []any{r.bc.unknown, r.unknownAcct, "25 hours"}},
		{"BacklogUnknownAttempts", []any{r.bc.unknown, r.unknownAcct, "25 hours"}},
		{"BacklogWaitingPayments", []any{r.bc.waiting, r.pixAcct}},
		{"BacklogWaitingAttempts", []any{r.bc.waiting, r.pixAcct}},
		{"BenchVacuumAnalyze", nil},
		{"Checkpoint", nil},
	}
	for _, s := range steps {
		if _, err := r.db.Exec(ctx, query(s.q), s.args...); err != nil {
			return fmt.Errorf("seed backlog %s: %w", s.q, err)
		}
	}
	r.seeded += time.Since(t)
	return nil
}

// apiWindow offers the fixed create rate for the window, after a short
// unmeasured warm-up.
func (r *backlogRun) apiWindow() step {
	c := r.serviceClient()
	defer c.close()
	do := func(int) (string, bool) {
		k := r.keys.next("create")
		label, _ := c.create(k, createBody(k))
		return label, label == labelNew
	}
	openLoop("warmup", r.bc.rate, 64, 2*time.Second, do)
	return openLoop("create", r.bc.rate, 64, r.bc.load, do)
}

// jobsPhase restarts the service with its jobs on (and starts the other
// replicas), offers the API window while they run, and watches each job's
// pass until it ends or -watch runs out.
func (r *backlogRun) jobsPhase(ctx context.Context) ([]passResult, step, error) {
	r.svc.stop()
	env := []string{"RECONCILE_INTERVAL=1s", "PURGE_INTERVAL=1000h", "AUDIT_INTERVAL=1000h"}
	if r.bc.reconcileRate != "" {
		env = append(env, "RECONCILE_RATE="+r.bc.reconcileRate)
	}
	begin := time.Now()
	w := newWatcher(r, begin)
	var err error
	if r.svc, _, err = start("payments serve", slices.Concat(r.env, env), false, filepath.Join(r.dir, "payments"), "serve"); err != nil {
		return nil, step{}, err
	}
	if err := waitHealthy(ctx, r.svc, r.svcBase+"/readyz"); err != nil {
		return nil, step{}, err
	}
	for range r.bc.replicas - 1 {
		addr, err := freeAddr()
		if err != nil {
			return nil, step{}, err
		}
		p, _, err := start("payments serve (replica)", slices.Concat(r.env, env, []string{"HTTP_ADDR=" + addr}), false,
			filepath.Join(r.dir, "payments"), "serve")
		if err != nil {
			return nil, step{}, err
		}
		r.replicas = append(r.replicas, p)
	}
	stop := w.run(ctx)
	withJobs := r.apiWindow()
	deadline := begin.Add(r.bc.watch)
	for !w.done() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Second)
	}
	stop()
	return w.results(), withJobs, nil
}

// passResult is one job's pass as watched from outside.
type passResult struct {
	job      string
	items    int
	left     int
	duration time.Duration // to the pass's end, or the watch's if it did not end
	calls    int           // simulator requests of the job's account
	finished bool
}

// report prints one line per job and the API's latency with and without.
func (r *backlogRun) report(base, withJobs step, passes []passResult) {
	rate := "default"
	if r.bc.reconcileRate != "" {
		rate = r.bc.reconcileRate
	}
	fmt.Fprintf(r.out, "\nRECONCILE_RATE %s, replicas %d\n", rate, r.bc.replicas)
	fmt.Fprintf(r.out, "%-18s %9s %9s %12s %14s %14s\n", "job", "backlog", "left", "pass", "calls/min", "calls/item")
	for _, p := range passes {
		d := p.duration.Round(100 * time.Millisecond).String()
		if !p.finished {
			d = ">" + d
		}
		perMin, perItem := 0.0, 0.0
		if p.duration > 0 {
			perMin = float64(p.calls) / p.duration.Minutes()
		}
		if done := p.items - p.left; done > 0 {
			perItem = float64(p.calls) / float64(done)
		}
		fmt.Fprintf(r.out, "%-18s %9d %9d %12s %14.0f %14.2f\n", p.job, p.items, p.left, d, perMin, perItem)
	}
	fmt.Fprintf(r.out, "\nAPI create at %.0f/s for %s   %8s %8s %8s %8s %s\n", r.bc.rate, r.bc.load, "n", "p50 ms", "p95 ms", "p99 ms", "errors")
	for _, s := range []struct {
		name string
		s    step
	}{{"without the jobs", base}, {"with the jobs", withJobs}} {
		fmt.Fprintf(r.out, "  %-32s %8d %8.1f %8.1f %8.1f %d %s\n", s.name, s.s.N, ms(s.s.P50), ms(s.s.P95), ms(s.s.P99),
			s.s.Errors, outcomes(s.s.Outcomes))
	}
}

// simRequests reads the simulator's request count for each secret key.
func simRequests(base string) (map[string]int, error) {
	resp, err := http.Get(base + "/_sim/stats")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var s struct {
		ByKey map[string]struct {
			Requests int `json:"requests"`
		} `json:"by_key"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for k, v := range s.ByKey {
		out[k] = v.Requests
	}
	return out, nil
}

// serviceProviderCalls sums payments_provider_calls_total on /metrics.
func serviceProviderCalls(base string) float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	total := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "payments_provider_calls_total{") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total += v
		}
	}
	return total
}
