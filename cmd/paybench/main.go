// Command paybench is the load generator of the money path. It builds and
// starts the real binaries on a fresh database (payments serve, providersim
// at zero latency), drives three workloads at increasing concurrency (new
// payments, replays of one payment, bursts of concurrent duplicates), and
// measures the same steps against two ceilings: pgbench running the minimal
// SQL of a create, and a minimal net/http + pgx server answering the single
// indexed read of a replay. It then preloads idempotency_keys with a long
// history and measures creates and replays again. docs/BENCHMARKS.md explains
// the figures.
//
// paybench is an instrument, not part of the service: the ceiling server,
// the pgbench script and the history preload talk to PostgreSQL directly,
// with their SQL in sql/.
//
//	go run ./cmd/paybench [-short] [-clients 1,8,32,128] [-duration 10s] [-history-rows 10000000]
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "paybench:", err)
		os.Exit(1)
	}
}

type config struct {
	adminURL        string
	clients         []int
	duration        time.Duration
	warmup          time.Duration
	historyRows     int64
	historyClients  int
	pgbench         string
	serviceDBParams string
	serviceDBHost   string
	keep            bool
	short           bool
	perfDir         string
	perfClients     int
	workloads       map[string]bool
	ceilings        bool
	seedTenants     int
	seedPayments    int
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("paybench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("DATABASE_URL")
	if def == "" {
		def = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	var c config
	clients := fs.String("clients", "1,8,32,128", "concurrency steps, comma separated")
	workloads := fs.String("workloads", "create,replay,burst", "service workloads to run, comma separated")
	fs.BoolVar(&c.ceilings, "ceilings", true, "measure the pgbench and minimal-server ceilings")
	fs.StringVar(&c.adminURL, "database-url", def, "a PostgreSQL URL with the right to create databases; the bench database is created beside it (env DATABASE_URL)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "length of each measured step")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured warm-up before each step")
	fs.Int64Var(&c.historyRows, "history-rows", 10_000_000, "idempotency keys to preload for the history steps; 0 skips them")
	fs.IntVar(&c.historyClients, "history-clients", 32, "concurrency of the history steps")
	fs.StringVar(&c.pgbench, "pgbench", findPgbench(), "the pgbench binary")
	fs.StringVar(&c.serviceDBParams, "service-db-params", "", "extra DATABASE_URL parameters for the service only, such as pool_max_conns=16")
	fs.StringVar(&c.serviceDBHost, "service-db-host", "", "host:port the service reaches the bench database through, such as a PgBouncer (scripts/topology.sh pgbouncer); it migrates through the direct URL (MIGRATE_DATABASE_URL)")
	fs.IntVar(&c.seedTenants, "seed-tenants", 1000, "other tenants in the bench database before the first step")
	fs.IntVar(&c.seedPayments, "seed-payments", 100_000, "their past payments (each with its attempt); 0 starts from empty tables")
	fs.BoolVar(&c.keep, "keep", false, "keep the bench database (its name is printed)")
	fs.StringVar(&c.perfDir, "perf", "", "record a system-wide perf profile (perf record -a -g) of each measured step at -perf-clients into this directory; the profiler's own cost lowers those steps' figures")
	fs.IntVar(&c.perfClients, "perf-clients", 32, "the concurrency profiled by -perf")
	fs.BoolVar(&c.short, "short", false, "a smoke run of seconds: clients 1,32, 1s steps, 1M history rows (explicit flags win)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.short {
		if !set["clients"] {
			*clients = "1,32"
		}
		if !set["duration"] {
			c.duration = time.Second
		}
		if !set["warmup"] {
			c.warmup = 200 * time.Millisecond
		}
		if !set["history-rows"] {
			c.historyRows = 1_000_000
		}
		if !set["seed-payments"] {
			c.seedPayments = 20_000
		}
	}
	for f := range strings.SplitSeq(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return c, fmt.Errorf("-clients: %q is not a positive number", f)
		}
		c.clients = append(c.clients, n)
	}
	c.workloads = map[string]bool{}
	for w := range strings.SplitSeq(*workloads, ",") {
		switch w = strings.TrimSpace(w); w {
		case "create", "replay", "burst":
			c.workloads[w] = true
		default:
			return c, fmt.Errorf("-workloads: unknown workload %q (create, replay, burst)", w)
		}
	}
	if c.seedPayments > 0 && c.seedTenants < 1 {
		return c, errors.New("-seed-payments needs -seed-tenants of at least 1")
	}
	if c.duration < time.Second {
		return c, errors.New("-duration must be at least 1s (pgbench counts whole seconds)")
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "minimal-server" {
		return serveMinimal(args[1:])
	}
	if len(args) > 0 && args[0] == "backlog" {
		return runBacklog(ctx, args[1:], stdout)
	}
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	b := &bench{cfg: cfg, out: stdout, cores: runtime.NumCPU(), created: &atomic.Int64{}}
	b.keys.prefix = "pb" + randomHex(4)
	defer b.cleanup()
	started := time.Now()
	if err := b.setup(ctx); err != nil {
		return err
	}
	b.header()
	if err := b.serviceSteps(ctx); err != nil {
		return err
	}
	if cfg.ceilings {
		if err := b.ceilings(ctx); err != nil {
			return err
		}
	}
	if cfg.historyRows > 0 {
		if err := b.history(ctx); err != nil {
			return err
		}
	}
	b.correctness(ctx)
	b.targets()
	fmt.Fprintf(b.out, "\ntotal %s\n", time.Since(started).Round(time.Second))
	return nil
}

// bench is one run: the database, the processes and the figures.
type bench struct {
	cfg   config
	out   io.Writer
	cores int
	// svcDB says how the service reaches the database: directly or
	// through a pooler, and with which query execution mode.
	svcDB string

	admin    *pgxpool.Pool
	dbName   string
	dbURL    string
	db       *pgxpool.Pool
	dir      string
	sim, svc *proc
	simBase  string
	svcBase  string
	acctID   string
	apiKey   string
	// apiKeys8 are eight accounts' keys, the first being apiKey: the
	// create-8acct step spreads the same load over them.
	apiKeys8 []string
	settings string
	loadAvg  string
	// env is the service's environment; serveEnv is added to it for
	// `payments serve`, and beforeServe runs after the seed, before serve
	// starts (the backlog mode's hooks).
	env         []string
	serveEnv    []string
	beforeServe func(context.Context) error
	addr        string
	seeded      time.Duration
	scrape      time.Duration

	keys       keys
	created    *atomic.Int64
	replayKey  string
	replayBody string
	replayResp []byte

	steps   []step // service steps
	half    step
	pgbench []step
	minimal []step
	hist    historyResult
}

type historyResult struct {
	info          historyInfo
	before, after []step
}

func (b *bench) setup(ctx context.Context) error {
	var err error
	if b.admin, err = pgxpool.New(ctx, b.cfg.adminURL); err != nil {
		return err
	}
	if err := b.admin.QueryRow(ctx, query("ServerSettings")).Scan(&b.settings); err != nil {
		return fmt.Errorf("postgres at -database-url: %w", err)
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.loadAvg = strings.Join(strings.Fields(string(la))[:3], " ")
	}
	b.dbName = "bench_" + randomHex(6)
	if _, err := b.admin.Exec(ctx, query("BenchDatabaseCreate", "db", b.dbName)); err != nil {
		b.dbName = ""
		return err
	}
	u, err := url.Parse(b.cfg.adminURL)
	if err != nil {
		return err
	}
	u.Path = "/" + b.dbName
	b.dbURL = u.String()
	if b.dir, err = os.MkdirTemp("", "paybench"); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "paybench: building the binaries, database %s\n", b.dbName)
	if err := buildBinaries(ctx, b.dir); err != nil {
		return err
	}

	b.sim, b.simBase, err = start("providersim", nil, true, filepath.Join(b.dir, "providersim"), "-addr", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if b.simBase == "" {
		return fmt.Errorf("providersim did not say where it listens\n%s", b.sim.logs.String())
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	svcURL, err := b.serviceURL()
	if err != nil {
		return err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	env := []string{"DATABASE_URL=" + svcURL, "MIGRATE_DATABASE_URL=" + b.dbURL, "ENCRYPTION_KEY=" + base64.StdEncoding.EncodeToString(key),
		"STRIPE_API_BASE=" + b.simBase, "LOG_LEVEL=warn", "HTTP_ADDR=" + addr}
	if b.acctID, b.apiKey, err = createAccount(ctx, filepath.Join(b.dir, "payments"), env); err != nil {
		return err
	}
	if b.apiKeys8, err = eightAccounts(ctx, filepath.Join(b.dir, "payments"), env, b.apiKey); err != nil {
		return err
	}
	if b.db, err = pgxpool.New(ctx, b.dbURL); err != nil {
		return err
	}
	if err := b.seed(ctx); err != nil {
		return err
	}
	b.env, b.addr = env, addr
	if b.beforeServe != nil {
		if err := b.beforeServe(ctx); err != nil {
			return err
		}
	}
	if b.svc, _, err = start("payments serve", slices.Concat(env, b.serveEnv), false, filepath.Join(b.dir, "payments"), "serve"); err != nil {
		return err
	}
	b.svcBase = "http://" + addr
	if err := waitHealthy(ctx, b.svc, b.svcBase+"/readyz"); err != nil {
		return err
	}
	t := time.Now()
	scrapeServerTimes(b.svcBase)
	b.scrape = time.Since(t)
	return b.firstCreate()
}

// eightAccounts is first's key and those of seven more accounts.
func eightAccounts(ctx context.Context, bin string, env []string, first string) ([]string, error) {
	keys := []string{first}
	for len(keys) < 8 {
		_, k, err := createAccount(ctx, bin, env)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// firstCreate makes the payment the replay workload replays.
func (b *bench) firstCreate() error {
	b.replayKey = b.keys.next("replay")
	b.replayBody = createBody(b.replayKey)
	c := b.serviceClient()
	defer c.close()
	label, body := c.create(b.replayKey, b.replayBody)
	if label != labelNew {
		return fmt.Errorf("the first create answered %s: %s\n%s", label, body, b.svc.logs.String())
	}
	b.replayResp = body
	return nil
}

// serviceURL is the service's DATABASE_URL: the bench database with the
// -service-db-params, through -service-db-host; it also says so in svcDB.
func (b *bench) serviceURL() (string, error) {
	svcURL := b.dbURL
	if b.cfg.serviceDBParams != "" {
		su, _ := url.Parse(svcURL)
		q := su.Query()
		extra, err := url.ParseQuery(b.cfg.serviceDBParams)
		if err != nil {
			return "", fmt.Errorf("-service-db-params: %w", err)
		}
		for k, v := range extra {
			q[k] = v
		}
		su.RawQuery = q.Encode()
		svcURL = su.String()
	}
	if b.cfg.serviceDBHost != "" {
		su, _ := url.Parse(svcURL)
		su.Host = b.cfg.serviceDBHost
		svcURL = su.String()
	}
	b.svcDB = "direct"
	if b.cfg.serviceDBHost != "" {
		b.svcDB = "through " + b.cfg.serviceDBHost
	}
	mode := "cache_statement"
	if su, err := url.Parse(svcURL); err == nil && su.Query().Get("default_query_exec_mode") != "" {
		mode = su.Query().Get("default_query_exec_mode")
	}
	b.svcDB += ", default_query_exec_mode=" + mode
	return svcURL, nil
}

// seed fills the bench database with other tenants' past payments.
func (b *bench) seed(ctx context.Context) error {
	t := time.Now()
	if b.cfg.seedPayments > 0 {
		if _, err := b.db.Exec(ctx, query("SeedTenants"), b.cfg.seedTenants); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		for _, q := range []string{"SeedPayments", "SeedAttempts", "SeedKeys"} {
			if _, err := b.db.Exec(ctx, query(q), b.cfg.seedPayments, b.cfg.seedTenants); err != nil {
				return fmt.Errorf("seed: %w", err)
			}
		}
	}
	// The seed's dirty pages are written now rather than by a checkpoint
	// spread over the first steps.
	for _, q := range []string{"BenchVacuumAnalyze", "Checkpoint"} {
		if _, err := b.db.Exec(ctx, query(q)); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	b.seeded = time.Since(t)
	return nil
}

func (b *bench) serviceClient() *client { return newClient(b.svcBase, b.apiKey, b.created) }

// cleanup stops what setup started and drops the bench database.
func (b *bench) cleanup() {
	b.svc.stop()
	b.sim.stop()
	if b.db != nil {
		b.db.Close()
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
	if b.admin == nil {
		return
	}
	defer b.admin.Close()
	if b.dbName == "" {
		return
	}
	if b.cfg.keep {
		fmt.Fprintf(os.Stderr, "paybench: kept database %s\n", b.dbName)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.admin.Exec(ctx, query("BenchDatabaseDrop", "db", b.dbName)); err != nil {
		fmt.Fprintf(os.Stderr, "paybench: drop database %s: %v\n", b.dbName, err)
	}
}

// measured runs a workload once unmeasured (warm-up), then measured, and
// adds the CPU use of every process and the target's peak RSS.
func (b *bench) measured(ctx context.Context, target *proc, name string, clients int, workload func(d time.Duration) step) step {
	b.vacuum(ctx)
	peakReset := target.resetPeakRSS()
	if b.cfg.warmup > 0 {
		workload(b.cfg.warmup)
	}
	var stopPerf func() string
	if b.cfg.perfDir != "" && clients == b.cfg.perfClients {
		stopPerf = startPerf(b.cfg.perfDir, fmt.Sprintf("%s-%d", name, clients), target.pid())
	}
	before := snapCPU(b.dbName, target.pid(), b.sim.pid())
	var times serverTimes
	if target == b.svc {
		times = scrapeServerTimes(b.svcBase)
	}
	s := workload(b.cfg.duration)
	s.CPU = snapCPU(b.dbName, target.pid(), b.sim.pid()).since(before, b.cores)
	if target == b.svc {
		s.Note = joinNote(s.Note, scrapeServerTimes(b.svcBase).means(times))
	}
	if stopPerf != nil {
		s.Note = joinNote(s.Note, stopPerf())
	}
	if s.CPU.Steal > 0.05 {
		s.Note = joinNote(s.Note, fmt.Sprintf("cpu steal %.0f%%", 100*s.CPU.Steal))
	}
	s.PeakRSS = target.peakRSS()
	if !peakReset {
		s.Note = joinNote(s.Note, "peak RSS since start")
	}
	return s
}

// vacuum cleans the bench database between steps, so a step does not pay
// for the dead rows of the one before (autovacuum may be off, as it is on
// the shared server, or not have run yet).
func (b *bench) vacuum(ctx context.Context) {
	if _, err := b.db.Exec(ctx, query("BenchVacuum")); err != nil {
		fmt.Fprintf(os.Stderr, "paybench: vacuum: %v\n", err)
	}
}

// Workloads, as functions of the step length.

func (b *bench) createLoad(c *client, clients int) func(time.Duration) step {
	return func(d time.Duration) step {
		// A consumer follows the feed through the step: its lag behind
		// commits under this load.
		stop := followFeed(c)
		s := closedLoop("create", clients, d, func(int) (string, bool) {
			k := b.keys.next("c")
			label, _ := c.create(k, createBody(k))
			return label, label == labelNew
		})
		s.Note = joinNote(s.Note, stop().String())
		return s
	}
}

// create8Load is createLoad spread over eight accounts, client w using
// account w mod 8: what one account's creates give up to the others.
func (b *bench) create8Load(_ *client, clients int) func(time.Duration) step {
	return func(d time.Duration) step {
		cs := make([]*client, len(b.apiKeys8))
		for i, k := range b.apiKeys8 {
			cs[i] = newClient(b.svcBase, k, b.created)
		}
		defer func() {
			for _, c := range cs {
				c.close()
			}
		}()
		return closedLoop("create-8acct", clients, d, func(w int) (string, bool) {
			k := b.keys.next("e")
			label, _ := cs[w%len(cs)].create(k, createBody(k))
			return label, label == labelNew
		})
	}
}

func (b *bench) replayLoad(c *client, clients int) func(time.Duration) step {
	return func(d time.Duration) step {
		return closedLoop("replay", clients, d, func(int) (string, bool) {
			label, _ := c.create(b.replayKey, b.replayBody)
			return label, label == labelReplayed
		})
	}
}

func (b *bench) burstLoad(c *client, clients int) func(time.Duration) step {
	return func(d time.Duration) step {
		return burstLoop("burst", clients, d, func() (string, string) {
			k := b.keys.next("b")
			return k, createBody(k)
		}, c)
	}
}

func (b *bench) serviceSteps(ctx context.Context) error {
	c := b.serviceClient()
	defer c.close()
	fmt.Fprintf(b.out, "\nservice: payments serve + providersim (zero latency), LOG_LEVEL=warn\n")
	stepHeader(b.out, "workload")
	loads := []struct {
		name string
		load func(*client, int) func(time.Duration) step
	}{{"create", b.createLoad}, {"create-8acct", b.create8Load}, {"replay", b.replayLoad}, {"burst", b.burstLoad}}
	for _, l := range loads {
		if !b.cfg.workloads[strings.TrimSuffix(l.name, "-8acct")] {
			continue
		}
		for _, n := range b.cfg.clients {
			if err := ctx.Err(); err != nil {
				return err
			}
			s := b.measured(ctx, b.svc, l.name, n, l.load(c, n))
			b.steps = append(b.steps, s)
			stepRow(b.out, s.Workload, s)
			if err := b.svc.failed(); err != nil {
				return err
			}
		}
	}

	if !b.cfg.workloads["create"] {
		return nil
	}
	best := peak(b.stepsOf("create"))
	rate := best.Throughput() / 2
	workers := slices.Max(b.cfg.clients)
	b.half = b.measured(ctx, b.svc, "create-half", workers, func(d time.Duration) step {
		stop := followFeed(c)
		s := openLoop("create@half", rate, workers, d, func(int) (string, bool) {
			k := b.keys.next("h")
			label, _ := c.create(k, createBody(k))
			return label, label == labelNew
		})
		s.Note = joinNote(s.Note, stop().String())
		return s
	})
	fmt.Fprintf(b.out, "\ncreate at half the peak (open loop: %.0f req/s offered = peak %.0f at %d clients / 2; up to %d callers; latency from when each request was due)\n",
		rate, best.Throughput(), best.Clients, workers)
	stepHeader(b.out, "workload")
	stepRow(b.out, "create@half", b.half)
	return nil
}

func (b *bench) stepsOf(workload string) []step {
	var out []step
	for _, s := range b.steps {
		if s.Workload == workload {
			out = append(out, s)
		}
	}
	return out
}

func (b *bench) stepAt(steps []step, clients int) (step, bool) {
	for _, s := range steps {
		if s.Clients == clients {
			return s, true
		}
	}
	return step{}, false
}

// ceilings measures pgbench with the minimal SQL of a create, and the
// minimal replay server, at the same concurrency steps.
func (b *bench) ceilings(ctx context.Context) error {
	const ceilingAccount = "acct_paybench_ceiling"
	if _, err := b.db.Exec(ctx, query("CeilingAccountSeed"), ceilingAccount); err != nil {
		return err
	}
	var request, event, response *string
	if err := b.db.QueryRow(ctx, query("PayloadSamples"), b.acctID).Scan(&request, &event, &response); err != nil {
		return err
	}
	if request == nil || event == nil || response == nil {
		return errors.New("no payload samples: the service wrote no attempt, event or response")
	}
	script := filepath.Join(b.dir, "pgbench_create.sql")
	if err := os.WriteFile(script, []byte(pgbenchCreateScript), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(b.out, "\nceiling 1: pgbench -M prepared, the minimal SQL of a create (tx 1: key, payment, attempt, event; tx 2: key with response, payment, event)\n")
	stepHeader(b.out, "workload")
	vars := map[string]string{"acct": ceilingAccount, "attempt_request": *request,
		"event_payload": *event, "response_body": *response}
	// The service reaches PostgreSQL through a pool of this many connections
	// whatever the client count; pgbench with as many shows what the database
	// gives that pool, without the contention of one session per client.
	// Steps run in ascending order, the pool's among them.
	pool := b.servicePoolSize()
	conns := slices.Clone(b.cfg.clients)
	if !slices.Contains(conns, pool) {
		conns = append(conns, pool)
	}
	slices.Sort(conns)
	for i, n := range conns {
		s, err := b.pgbenchStep(ctx, script, vars, n, i+1)
		if err != nil {
			return err
		}
		name := "pgbench"
		if !slices.Contains(b.cfg.clients, n) {
			name = "pgbench@pool"
			s.Note = joinNote(s.Note, "the service's pool size")
			s.Workload = name
		}
		b.pgbench = append(b.pgbench, s)
		stepRow(b.out, name, s)
	}

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	m, base, err := start("minimal server", nil, true, exe, "minimal-server", "-database-url", b.dbURL, "-account", b.acctID)
	if err != nil {
		return err
	}
	defer m.stop()
	if base == "" {
		return fmt.Errorf("the minimal server did not start\n%s", m.logs.String())
	}
	c := newClient(base, "", &atomic.Int64{})
	defer c.close()
	fmt.Fprintf(b.out, "\nceiling 2: minimal server (net/http + pgx, one indexed read of the stored response), same load generator\n")
	stepHeader(b.out, "workload")
	for _, n := range b.cfg.clients {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := b.measured(ctx, m, "minimal", n, b.replayLoad(c, n))
		s.Workload = "minimal"
		b.minimal = append(b.minimal, s)
		stepRow(b.out, "minimal", s)
	}
	return m.failed()
}

// pgbenchStep runs the create script with n clients, capped by the
// connections the server has left.
func (b *bench) pgbenchStep(ctx context.Context, script string, vars map[string]string, n, run int) (step, error) {
	var free int
	if err := b.admin.QueryRow(ctx, query("ConnectionsFree")).Scan(&free); err != nil {
		return step{}, err
	}
	conns := max(1, min(n, free-5))
	b.vacuum(ctx)
	r := pgbenchRun{bin: b.cfg.pgbench, url: b.dbURL, script: script, dir: b.dir, clients: conns,
		threads: min(conns, b.cores), d: b.cfg.duration, run: run, vars: vars}
	// pgbench's backends exit with it: CPU is sampled just before the end.
	var before, after cpuSnap
	done := make(chan struct{})
	s, err := r.exec(ctx, func(pid int) {
		before = snapCPU(b.dbName, 0, b.sim.pid(), pid)
		go func() {
			defer close(done)
			time.Sleep(b.cfg.duration - 200*time.Millisecond)
			after = snapCPU(b.dbName, 0, b.sim.pid(), pid)
		}()
	})
	if err != nil {
		return s, err
	}
	<-done
	s.Workload, s.Clients, s.Conns = "pgbench", n, conns
	s.CPU = after.since(before, b.cores)
	if conns != n {
		s.Note = fmt.Sprintf("capped at %d connections (max_connections)", conns)
	}
	return s, nil
}

// servicePoolSize is pgxpool's default, max(4, CPUs), unless
// -service-db-params sets pool_max_conns.
func (b *bench) servicePoolSize() int {
	if v, err := url.ParseQuery(b.cfg.serviceDBParams); err == nil {
		if n, err := strconv.Atoi(v.Get("pool_max_conns")); err == nil && n > 0 {
			return n
		}
	}
	return max(4, b.cores)
}

// history preloads idempotency_keys and measures creates and replays again
// at one concurrency.
func (b *bench) history(ctx context.Context) error {
	n := b.cfg.historyClients
	c := b.serviceClient()
	defer c.close()
	// Replays first: creates after the preload dirty pages of the big index
	// that the server writes back during the next step.
	loads := []struct {
		name string
		load func(*client, int) func(time.Duration) step
	}{{"replay", b.replayLoad}, {"create", b.createLoad}}
	// The preload ends with a checkpoint; so do the steps it is compared with.
	if _, err := b.db.Exec(ctx, query("Checkpoint")); err != nil {
		return err
	}
	for _, w := range loads {
		// Measured again right before the preload, not taken from the
		// steps above: minutes later, on a shared machine, the comparison
		// would be with another moment's noise.
		s := b.measured(ctx, b.svc, w.name+"-before", n, w.load(c, n))
		s.Workload = w.name + "@before"
		b.hist.before = append(b.hist.before, s)
	}
	fmt.Fprintf(os.Stderr, "paybench: preloading %d idempotency keys\n", b.cfg.historyRows)
	info, err := preloadHistory(ctx, b.db, b.acctID, b.cfg.historyRows, b.replayResp)
	b.hist.info = info
	if err != nil {
		return err
	}
	if !info.Identical {
		return errors.New("history: the rebuilt indexes of idempotency_keys differ from the migrated ones")
	}
	fmt.Fprintf(b.out, "\nhistory: idempotency_keys preloaded with %d rows (%s with indexes, unique key index %s; insert %s, index rebuild %s, vacuum+checkpoint %s)\n",
		info.Rows, info.TableSize, info.IndexSize, info.Load.Round(time.Second), info.Index.Round(time.Second), info.Vacuum.Round(time.Second))
	stepHeader(b.out, "workload")
	for _, s := range b.hist.before {
		stepRow(b.out, s.Workload, s)
	}
	for i, w := range loads {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := b.measured(ctx, b.svc, w.name+"-hist", n, w.load(c, n))
		s.Workload = w.name + "@hist"
		b.hist.after = append(b.hist.after, s)
		stepRow(b.out, s.Workload, s)
		fmt.Fprintf(b.out, "%-12s %7s  %s of %s\n", "", "", pct(s.Throughput(), b.hist.before[i].Throughput()), b.hist.before[i].Workload)
	}
	return b.svc.failed()
}

// correctness compares the provider's authorizations with the creates the
// service answered as new: a difference would be a double charge or a lost
// one.
func (b *bench) correctness(ctx context.Context) {
	auth, err := simAuthorizations(ctx, b.simBase)
	if err != nil {
		fmt.Fprintf(b.out, "\ncorrectness: could not read the simulator's stats: %v\n", err)
		return
	}
	verdict := "every new payment authorized exactly once"
	if int64(auth) != b.created.Load() {
		verdict = "MISMATCH: a payment was authorized twice or not at all"
	}
	fmt.Fprintf(b.out, "\ncorrectness: provider authorizations %d, creates answered 201 new %d: %s\n", auth, b.created.Load(), verdict)
}

// joinNote appends to a step's note.
func joinNote(note, more string) string {
	switch {
	case more == "":
		return note
	case note == "":
		return more
	}
	return note + ", " + more
}

func randomHex(n int) string {
	p := make([]byte, n)
	_, _ = rand.Read(p)
	return hex.EncodeToString(p)
}
