// Package chaos is the reliability instrument behind `make chaos`: it runs
// the real binaries (the provider simulator with random faults and several
// `payments serve` replicas on one fresh database, both with a provider key
// retention short enough that re-send windows close during the run), drives
// them with a fleet of checkout clients and signed, late, duplicated
// webhooks while replicas are SIGKILLed and restarted and the account's
// secret key is revoked for seconds at a time, then stops the faults,
// reconciles with `payments reconcile --once`, and checks the invariants
// against the provider's own records and the database: no double charge,
// no lost payment, no client-visible lie, nothing stranded.
package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/acmepay/payments/internal/notify"
	"github.com/acmepay/payments/internal/postgres/pgxid"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// Service settings of the run: short enough that leases expire, the
// reconciler runs and injected delays outlast the provider timeout many
// times within a few minutes.
const (
	providerTimeout = time.Second
	inProgressLease = 3 * time.Second
	reconcileEvery  = time.Second
	reconcileAfter  = 2 * time.Second
	// Short, so that the passes after the run find every attempt due again
	// within seconds.
	reconcileMaxBackoff = 4 * time.Second
	searchGrace         = 5 * time.Second
	// Random faults on the provider's mutating requests.
	dropShare  = 0.10 // the effect happens, the response is lost
	error500   = 0.05 // 500 before any effect
	delayShare = 0.05 // the effect happens, the answer comes after the timeout
	delayFor   = providerTimeout + time.Second
	maxPasses  = 40 // reconcile --once passes after the run
)

// Config sizes a run. Zero values take the defaults of a full run (or of a
// short one with Short).
type Config struct {
	Duration time.Duration // default 3m; 30s with Short
	Replicas int           // default 3
	Clients  int           // default 8; 6 with Short
	Seed     uint64        // 0 picks one
	// KillEvery is the mean time between SIGKILLs of a replica; default 6s
	// (4s with Short).
	KillEvery time.Duration
	// RevokeEvery is the mean time between revocations of the account's
	// secret key at the provider; default 10s (8s with Short).
	RevokeEvery time.Duration
	// KeyWindow is the re-send window the shared provider key retention
	// leaves the service; default 4s.
	KeyWindow time.Duration
	Short     bool
	// The run's database lives on a private cluster whose next xid8 starts
	// just below a boundary chosen by Seed (a power of ten or an epoch);
	// RestartPostgres restarts that cluster once during the run.
	// SharedPostgres puts it on the shared server instead (TEST_DATABASE_URL
	// or scripts/pg.sh url), which is neither moved nor restarted.
	RestartPostgres bool
	SharedPostgres  bool
	// Keep leaves the database and the work directory (binaries, logs).
	Keep bool
	// Pooler, when set, returns the URL through which the replicas reach
	// the run's database (for example PgBouncer in transaction mode); they
	// migrate through the direct URL (MIGRATE_DATABASE_URL), and the
	// invariants are checked on it.
	Pooler func(direct string) (string, error)
	// Server, when set, is the database server of the run instead of
	// TEST_DATABASE_URL: for example a pg_auto_failover formation's
	// multi-host URL (scripts/topology.sh formation).
	Server string
	// Failover, when set, is called once at 45% of the run to stop the
	// server's primary and have the standby promoted (scripts/topology.sh
	// failover); it calls stopped once the primary is down. The report
	// gives the time from then to the first successful create.
	Failover func(ctx context.Context, stopped func()) error
	LogLevel string // of the replicas; default info
	Out      io.Writer
}

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = 3 * time.Minute
		if c.Short {
			c.Duration = 30 * time.Second
		}
	}
	if c.Replicas <= 0 {
		c.Replicas = 3
	}
	if c.Clients <= 0 {
		c.Clients = 8
		if c.Short {
			c.Clients = 6
		}
	}
	if c.KillEvery <= 0 {
		c.KillEvery = 6 * time.Second
		if c.Short {
			c.KillEvery = 4 * time.Second
		}
	}
	if c.RevokeEvery <= 0 {
		c.RevokeEvery = 10 * time.Second
		if c.Short {
			c.RevokeEvery = 8 * time.Second
		}
	}
	if c.KeyWindow <= 0 {
		c.KeyWindow = 4 * time.Second
	}
	if c.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		for i := range b {
			c.Seed = c.Seed<<8 | uint64(b[i])
		}
		c.Seed >>= 1 // fits an int64 for the simulator
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Run performs one chaos run and returns its figures. The error is for a
// run that could not be carried out; invariant breaches are in the Report.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg.defaults()
	out := cfg.Out
	say := func(format string, args ...any) { fmt.Fprintf(out, "chaos: "+format+"\n", args...) }
	rep = &Report{Seed: cfg.Seed, Duration: cfg.Duration, Replicas: cfg.Replicas, Clients: cfg.Clients}

	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		return nil, err
	}
	keepWork := cfg.Keep
	defer func() {
		if keepWork || err != nil || (rep != nil && rep.Violations() > 0) {
			say("binaries and logs kept in %s", work)
			return
		}
		os.RemoveAll(work)
	}()
	binDir, logDir := filepath.Join(work, "bin"), filepath.Join(work, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	say("seed %d, %s, %d replicas, %d clients; building the binaries", cfg.Seed, cfg.Duration, cfg.Replicas, cfg.Clients)
	if err := buildBinaries(ctx, root, binDir); err != nil {
		return nil, err
	}
	paymentsBin, simBin := filepath.Join(binDir, "payments"), filepath.Join(binDir, "providersim")

	// The database server, and whether this run may restart it.
	server, pg, stopServer, err := setupServer(ctx, cfg, rep, root, work, logDir, say)
	defer stopServer()
	if err != nil {
		return nil, err
	}
	if rep.Xid.Start, err = pgxid.Current(ctx, server); err != nil {
		return nil, err
	}
	dbName, dbURL, err := createDatabase(ctx, server)
	if err != nil {
		return nil, err
	}
	rep.Database = dbName
	defer func() {
		if cfg.Keep {
			say("database %s kept (%s)", dbName, dbURL)
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := dropDatabase(dctx, server, dbName); derr != nil {
			say("drop database %s: %v", dbName, derr)
		}
	}()
	say("database %s created", dbName)

	openLog := func(name string) (*os.File, error) {
		return os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stop()
			p.log.Close()
		}
	}()

	// The simulator.
	simAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	simLog, err := openLog("providersim")
	if err != nil {
		return nil, err
	}
	keys := keysFor(providerTimeout, cfg.KeyWindow)
	sim := &proc{name: "providersim", bin: simBin, addr: simAddr, health: "/_sim/stats", log: simLog,
		env: []string{"PROVIDERSIM_ADDR=" + simAddr, "PROVIDERSIM_KEY_RETENTION=" + keys.Retention.String()}}
	procs = append(procs, sim)
	if err := sim.start(ctx); err != nil {
		return nil, err
	}

	serviceURL := dbURL
	if cfg.Pooler != nil {
		if serviceURL, err = cfg.Pooler(dbURL); err != nil {
			return nil, fmt.Errorf("chaos: pooler: %w", err)
		}
		say("replicas reach the database through %s", serviceURL)
	}
	baseEnv := []string{
		"DATABASE_URL=" + serviceURL, "MIGRATE_DATABASE_URL=" + dbURL, "STRIPE_API_BASE=" + sim.url(),
		"ENCRYPTION_KEY=" + base64.StdEncoding.EncodeToString([]byte(randomHex(16))),
		"PROVIDER_TIMEOUT=" + providerTimeout.String(), "IN_PROGRESS_LEASE=" + inProgressLease.String(),
		"RECONCILE_INTERVAL=" + reconcileEvery.String(), "RECONCILE_AFTER=" + reconcileAfter.String(),
		"RECONCILE_MAX_BACKOFF=" + reconcileMaxBackoff.String(),
		"PROVIDER_SEARCH_GRACE=" + searchGrace.String(), "LOG_LEVEL=" + cfg.LogLevel, "ADMIN_TOKEN=",
		"PROVIDER_KEY_RETENTION=" + keys.Retention.String(),
		// The merchant's endpoint is on this machine.
		"WEBHOOK_ALLOW_PRIVATE=true",
	}
	runPayments := func(ctx context.Context, logName string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, paymentsBin, args...)
		cmd.Env = append(os.Environ(), baseEnv...)
		lf, err := openLog(logName)
		if err != nil {
			return nil, err
		}
		defer lf.Close()
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, lf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err = cmd.Run()
		return stdout.Bytes(), err
	}

	// The account, with its own provider key and webhook secret.
	secretKey, whsec := "sk_test_chaos_"+randomHex(12), "whsec_"+randomHex(16)
	acctOut, err := runPayments(ctx, "accounts", "accounts", "create", "--name", "chaos", "--stripe-key", secretKey, "--webhook-secret", whsec)
	if err != nil {
		return nil, fmt.Errorf("chaos: payments accounts create: %w (log: %s)", err, filepath.Join(logDir, "accounts.log"))
	}
	var acct struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(acctOut, &acct); err != nil || acct.APIKey == "" {
		return nil, fmt.Errorf("chaos: accounts create printed %q", acctOut)
	}

	// The replicas, each on its own address, all on one database.
	replicas := make([]*proc, cfg.Replicas)
	urls := make([]string, cfg.Replicas)
	for i := range replicas {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		lf, err := openLog(fmt.Sprintf("replica-%d", i))
		if err != nil {
			return nil, err
		}
		replicas[i] = &proc{name: fmt.Sprintf("replica-%d", i), bin: paymentsBin, args: []string{"serve"},
			env: append(append([]string{}, baseEnv...), "HTTP_ADDR="+addr), addr: addr, health: "/healthz", log: lf}
		procs = append(procs, replicas[i])
		if err := replicas[i].start(ctx); err != nil {
			return nil, err
		}
		urls[i] = replicas[i].url()
	}
	say("simulator on %s, replicas on %s; logs in %s", sim.url(), strings.Join(urls, " "), logDir)

	// The merchant's webhook endpoint, before any event.
	shop, err := startMerchant()
	if err != nil {
		return nil, err
	}
	defer shop.close()
	if err := shop.register(ctx, urls[0], acct.APIKey); err != nil {
		return nil, err
	}
	say("merchant webhook endpoint on %s", shop.url)
	say("provider key retention %s at the replicas and the simulator: margin %s, re-send window %s", keys.Retention, keys.Margin, keys.Window)

	ctl := &http.Client{Timeout: 30 * time.Second}
	if err := simControl(ctx, ctl, http.MethodPost, sim.url()+"/_sim/random-faults", map[string]any{
		"drop": dropShare, "error_500": error500, "delay": delayShare, "delay_for": delayFor.String(), "seed": int64(cfg.Seed),
	}); err != nil {
		return nil, err
	}

	// The run.
	runID := "ord-" + randomHex(3)
	fleet := newFleet(urls, acct.APIKey, runID)
	hooks := newWebhooks(sim.url(), secretKey, whsec, acct.ID, urls, cfg.Seed)
	creds := newRotation(sim.url(), secretKey)
	runCtx, stopRun := context.WithTimeout(ctx, cfg.Duration)
	defer stopRun()
	deliverCtx, stopDeliver := context.WithCancel(ctx)
	defer stopDeliver()
	var (
		kills, restarts, pgRestarts atomic.Int64
		fatalMu                     sync.Mutex
		fatal                       error
		wg                          sync.WaitGroup
	)
	setFatal := func(err error) {
		fatalMu.Lock()
		if fatal == nil {
			fatal = err
		}
		fatalMu.Unlock()
	}
	start := time.Now()
	say("running for %s", cfg.Duration)
	wg.Add(5)
	go func() { defer wg.Done(); fleet.run(runCtx, cfg.Clients, cfg.Seed) }()
	go func() {
		defer wg.Done()
		if err := creds.run(runCtx, cfg.RevokeEvery, cfg.Seed); err != nil {
			setFatal(err)
		}
	}()
	go func() { defer wg.Done(); hooks.generate(runCtx) }()
	go func() {
		defer wg.Done()
		rng := mrand.New(mrand.NewPCG(cfg.Seed, 0xdead))
		for {
			sleep(runCtx, cfg.KillEvery/2+time.Duration(rng.Int64N(int64(cfg.KillEvery))))
			if runCtx.Err() != nil {
				return
			}
			p := replicas[rng.IntN(len(replicas))]
			p.kill()
			kills.Add(1)
			// Down for a moment, as a crashed pod is before its restart.
			time.Sleep(300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond))))
			if err := restartProc(ctx, p); err != nil {
				setFatal(err)
				return
			}
			restarts.Add(1)
		}
	}()
	go func() {
		defer wg.Done()
		tick := time.NewTicker(15 * time.Second)
		defer tick.Stop()
		pgAt := time.After(cfg.Duration * 45 / 100)
		for {
			select {
			case <-runCtx.Done():
				return
			case <-pgAt:
				if cfg.Failover != nil {
					say("failing over: stopping the primary (immediate)")
					var at time.Time
					if err := cfg.Failover(ctx, func() { at = time.Now(); fleet.markFailover(at) }); err != nil {
						setFatal(fmt.Errorf("chaos: failover: %w", err))
						return
					}
					rep.Failovers++
					rep.FailoverPromoted = time.Since(at)
					say("failover: the standby accepts writes %s after the primary stopped", rep.FailoverPromoted.Round(10*time.Millisecond))
					continue
				}
				if pg == nil || !cfg.RestartPostgres {
					continue
				}
				say("restarting PostgreSQL (immediate shutdown)")
				if err := pg.restart(ctx); err != nil {
					setFatal(err)
					return
				}
				pgRestarts.Add(1)
			case <-tick.C:
				fleet.mu.Lock()
				t := fleet.t
				fleet.mu.Unlock()
				revocations, _ := creds.snapshot()
				say("t=%s orders %d, final %d, requests %d, kills %d, revocations %d", time.Since(start).Round(time.Second),
					t.Orders, t.FinalOrders, t.Requests, kills.Load(), revocations)
			}
		}
	}()
	deliverDone := make(chan struct{})
	go func() { defer close(deliverDone); hooks.deliver(deliverCtx, false) }()
	wg.Wait()
	rep.Kills, rep.Restarts, rep.PGRestarts = int(kills.Load()), int(restarts.Load()), int(pgRestarts.Load())
	rep.FailoverRecovery, rep.FailoverFailed = fleet.failoverFigures()
	if rep.Failovers > 0 && rep.FailoverRecovery == 0 {
		rep.NotRecovered = 1
	}
	rep.Revocations, rep.Revoked = creds.snapshot()
	if fatal != nil {
		return rep, fatal
	}
	say("run over after %s; secret key restored; stopping faults, keeping replica-0 up, reconciling", time.Since(start).Round(time.Second))

	// Quiesce: no more faults, one replica, the late webhooks drained.
	if err := simControl(ctx, ctl, http.MethodDelete, sim.url()+"/_sim/faults", nil); err != nil {
		return rep, err
	}
	if err := simControl(ctx, ctl, http.MethodPost, sim.url()+"/_sim/random-faults", map[string]any{"drop": 0, "error_500": 0, "delay": 0}); err != nil {
		return rep, err
	}
	if !replicas[0].running() {
		if err := restartProc(ctx, replicas[0]); err != nil {
			return rep, err
		}
	}
	for _, p := range replicas[1:] {
		p.stop()
	}
	stopDeliver()
	<-deliverDone
	hooks.setReplicas(urls[:1])
	drainCtx, stopDrain := context.WithTimeout(ctx, 60*time.Second)
	defer stopDrain()
	drained := make(chan struct{})
	go func() { defer close(drained); hooks.deliver(drainCtx, true) }()

	// Reconcile until nothing is unresolved, with a bound.
	for pass := 1; pass <= maxPasses; pass++ {
		rep.Passes = pass
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		sum, rerr := runPayments(pctx, "reconcile", "reconcile", "--once")
		cancel()
		np, na, nr, uerr := unresolved(ctx, dbURL)
		if rerr != nil || uerr != nil {
			say("reconcile pass %d: %v %v", pass, rerr, uerr)
		} else {
			say("reconcile pass %d: %s -> unresolved payments %d, attempts %d, refunds %d", pass, bytes.TrimSpace(sum), np, na, nr)
		}
		if rerr == nil && uerr == nil && np+na+nr == 0 {
			break
		}
		sleep(ctx, time.Second)
	}
	<-drained

	// Every event of the feed must reach the merchant. A delivery cut short
	// by the last kill is retried once River rescues it (notify.RescueAfter
	// after its attempt, on a rescuer pass every 30 s).
	// The feed serves an event only once every older transaction on the
	// server has ended, so it is read again until it stops growing.
	awaitCtx, stopAwait := context.WithTimeout(ctx, notify.RescueAfter+90*time.Second)
	waited := time.Now()
	var feed []string
	for {
		again, err := shop.feed(ctx, urls[0], acct.APIKey, 100)
		if err != nil {
			stopAwait()
			return rep, err
		}
		if feed != nil && len(again) == len(feed) {
			break
		}
		feed = again
		shop.await(awaitCtx, feed)
		if awaitCtx.Err() != nil {
			break
		}
	}
	stopAwait()
	got, bad := shop.snapshot()
	say("merchant webhooks: %d events in the feed, %d ids received, waited %s", len(feed), len(got), time.Since(waited).Round(time.Second))
	stored, reads, err := readFeeds(ctx, shop, urls[0], acct.APIKey, dbURL, acct.ID)
	if err != nil {
		return rep, err
	}
	if rep.Xid.End, err = pgxid.Current(ctx, server); err != nil {
		return rep, err
	}
	rep.Xid.Crossed = pgxid.Crossed(rep.Xid.Start, rep.Xid.End)
	say("xid8: %s", rep.Xid)

	// The figures.
	intents, err := simIntents(ctx, ctl, sim.url(), secretKey)
	if err != nil {
		return rep, err
	}
	if err := simGet(ctx, ctl, sim.url()+"/_sim/stats", &rep.Sim); err != nil {
		return rep, err
	}
	var reqs []providersim.Request
	if err := simGet(ctx, ctl, sim.url()+"/_sim/requests", &reqs); err != nil {
		return rep, err
	}
	rep.Faults = map[providersim.FaultKind]int{}
	for _, r := range reqs {
		if r.Fault != "" {
			rep.Faults[r.Fault]++
		}
	}
	st, err := loadLocalState(ctx, dbURL)
	if err != nil {
		return rep, err
	}
	rep.check(intents, st, fleet)
	rep.checkMerchant(feed, got, bad)
	rep.checkFeed(stored, reads)
	rep.checkRaces(reqs)
	rep.checkResends(reqs, keys)
	rep.checkNoEffect(reqs, intents, st)
	if rep.ResolvedByLookup, err = resolvedByLookup(logDir, st); err != nil {
		return rep, err
	}
	var hookSurprises []string
	rep.Webhooks, hookSurprises = hooks.snapshot()
	rep.Unexpected += len(hookSurprises)
	for _, s := range hookSurprises {
		rep.sample("unexpected webhook answer: %s", s)
	}
	return rep, nil
}

// restartProc starts a killed process again, retrying a start that fails.
func restartProc(ctx context.Context, p *proc) error {
	// As a supervisor does: a replica that cannot start (no writable
	// primary during a failover) is started again, for up to a minute.
	deadline := time.Now().Add(time.Minute)
	for {
		err := p.start(ctx)
		if err == nil || errors.Is(err, context.Canceled) || time.Now().After(deadline) {
			return err
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// simControl calls the simulator's control API.
func simControl(ctx context.Context, c *http.Client, method, target string, body any) error {
	var rdr io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rdr = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rdr)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("chaos: %s %s: %w", method, target, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("chaos: %s %s: %s %s", method, target, resp.Status, b)
	}
	return nil
}
