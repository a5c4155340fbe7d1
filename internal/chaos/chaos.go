// Package chaos is the reliability instrument behind `make chaos`: it runs
// the real binaries (the provider simulator with random faults and several
// `payments serve` replicas on one fresh database, both with a provider key
// retention short enough that re-send windows close during the run), drives
// them with a fleet of checkout clients and signed, late, duplicated
// webhooks while replicas are SIGKILLed and restarted and the account's
// provider credentials are revoked for seconds at a time, then stops the
// faults, reconciles with `payments reconcile --once`, and checks the
// invariants against both providers' own records (Stripe's intents, Mercado
// Pago's payments) and the database: no double charge, no lost payment, no
// client-visible lie, nothing stranded.
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
	// Each provider's circuit: opened by a few refused first sends, and
	// closed again within an outage or two.
	circuitFailures = 2
	circuitCooldown = 3 * time.Second
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
	// NoDBFaults turns off the faults between the replicas and PostgreSQL
	// (a proxy that loses COMMIT answers, resets, stalls and slows
	// connections), on by default; DBFaultEvery is their mean interval,
	// default 8s (5s with Short). A failover formation runs without them.
	NoDBFaults   bool
	DBFaultEvery time.Duration
	// OutageEvery is the mean time between outages of one provider
	// (connections refused, or accepted and never answered); default 15s
	// (10s with Short).
	OutageEvery time.Duration
	// KeyWindow is the re-send window the shared provider key retention
	// leaves the service; default 4s.
	KeyWindow time.Duration
	// MPRetained gives Mercado Pago keys a retention too, at the replicas
	// and the simulator, leaving the same re-send window as Stripe's;
	// without it they have none (MERCADOPAGO_KEY_RETENTION=0s, the
	// default): a Mercado Pago key is sent once and only looked up after.
	MPRetained bool
	Short      bool
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
	if c.DBFaultEvery <= 0 {
		c.DBFaultEvery = 8 * time.Second
		if c.Short {
			c.DBFaultEvery = 5 * time.Second
		}
	}
	if c.OutageEvery <= 0 {
		c.OutageEvery = 15 * time.Second
		if c.Short {
			c.OutageEvery = 10 * time.Second
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

// runner is the state the phases of one run share.
type runner struct {
	cfg Config
	rep *Report
	say func(format string, args ...any)

	logDir              string
	paymentsBin, simBin string
	pg                  *privatePostgres // nil unless the run has a private cluster
	dbURL               string
	procs               []*proc
	sim                 *proc
	keys, mpKeys        keySettings
	baseEnv             []string // of every payments process
	secretKey, whsec    string
	mpToken, mpSecret   string
	adminToken          string
	acctID, apiKey      string
	replicas            []*proc
	urls                []string
	shop                *merchant
	ctl                 *http.Client
	fleet               *fleet
	hooks               *webhooks
	creds               *rotation
	outages             *outages
	dbf                 *dbFaults // nil without database faults
	// fronts are each provider's API behind the simulator's outage front.
	stripeFront, mpFront string

	kills, restarts, pgRestarts atomic.Int64
	fatalMu                     sync.Mutex
	fatal                       error
}

// Run performs one chaos run and returns its figures. The error is for a
// run that could not be carried out; invariant breaches are in the Report.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg.defaults()
	out := cfg.Out
	say := func(format string, args ...any) { fmt.Fprintf(out, "chaos: "+format+"\n", args...) }
	rep = &Report{Seed: cfg.Seed, Duration: cfg.Duration, Replicas: cfg.Replicas, Clients: cfg.Clients}
	r := &runner{cfg: cfg, rep: rep, say: say}

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
	if err := r.build(ctx, root, work); err != nil {
		return nil, err
	}

	// The database server, and whether this run may restart it.
	server, pg, stopServer, err := setupServer(ctx, cfg, rep, root, work, r.logDir, say)
	defer stopServer()
	if err != nil {
		return nil, err
	}
	r.pg = pg
	dropDB, err := r.createDatabase(ctx, server)
	if err != nil {
		return nil, err
	}
	defer dropDB()

	defer r.stopProcs()
	if err := r.startSimulator(ctx); err != nil {
		return nil, err
	}
	if err := r.startService(ctx); err != nil {
		return nil, err
	}

	// The merchant's webhook endpoint, before any event.
	if r.shop, err = startMerchant(); err != nil {
		return nil, err
	}
	defer r.shop.close()
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}

	deliverCtx, stopDeliver := context.WithCancel(ctx)
	defer stopDeliver()
	deliverDone, err := r.drive(ctx, deliverCtx)
	if err != nil {
		return rep, err
	}
	if err := r.settle(ctx, stopDeliver, deliverDone); err != nil {
		return rep, err
	}
	feed, got, bad, err := r.awaitFeed(ctx)
	if err != nil {
		return rep, err
	}
	if err := r.figures(ctx, server, feed, got, bad); err != nil {
		return rep, err
	}
	return rep, nil
}

// build makes the work directory's log directory and builds the binaries.
func (r *runner) build(ctx context.Context, root, work string) error {
	binDir := filepath.Join(work, "bin")
	r.logDir = filepath.Join(work, "logs")
	if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		return err
	}
	cfg := r.cfg
	r.say("seed %d, %s, %d replicas, %d clients; building the binaries", cfg.Seed, cfg.Duration, cfg.Replicas, cfg.Clients)
	if err := buildBinaries(ctx, root, binDir); err != nil {
		return err
	}
	r.paymentsBin, r.simBin = filepath.Join(binDir, "payments"), filepath.Join(binDir, "providersim")
	return nil
}

// createDatabase notes the server's xid8 and creates the run's database;
// the returned func drops it again unless the run keeps it.
func (r *runner) createDatabase(ctx context.Context, server string) (drop func(), err error) {
	if r.rep.Xid.Start, err = pgxid.Current(ctx, server); err != nil {
		return nil, err
	}
	dbName, dbURL, err := createDatabase(ctx, server)
	if err != nil {
		return nil, err
	}
	r.rep.Database, r.dbURL = dbName, dbURL
	drop = func() {
		if r.cfg.Keep {
			r.say("database %s kept (%s)", dbName, dbURL)
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := dropDatabase(dctx, server, dbName); derr != nil {
			r.say("drop database %s: %v", dbName, derr)
		}
	}
	r.say("database %s created", dbName)
	return drop, nil
}

func (r *runner) openLog(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(r.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// stopProcs stops every process the run started and closes its log.
func (r *runner) stopProcs() {
	for _, p := range r.procs {
		p.stop()
		p.log.Close()
	}
	if r.dbf != nil {
		r.dbf.close()
	}
}

// startSimulator starts the provider simulator with the run's key retention.
func (r *runner) startSimulator(ctx context.Context) error {
	simAddr, err := freeAddr()
	if err != nil {
		return err
	}
	simLog, err := r.openLog("providersim")
	if err != nil {
		return err
	}
	r.keys = keysFor(providerTimeout, r.cfg.KeyWindow, libraryRetries)
	r.mpKeys = keySettings{}
	if r.cfg.MPRetained {
		r.mpKeys = keysFor(providerTimeout, r.cfg.KeyWindow, mpLibraryRetries)
	}
	stripeFront, err := freeAddr()
	if err != nil {
		return err
	}
	mpFront, err := freeAddr()
	if err != nil {
		return err
	}
	r.stripeFront, r.mpFront = "http://"+stripeFront, "http://"+mpFront
	r.sim = &proc{name: "providersim", bin: r.simBin, addr: simAddr, health: "/_sim/stats", log: simLog,
		args: []string{"-stripe-front", stripeFront, "-mp-front", mpFront},
		env: []string{"PROVIDERSIM_ADDR=" + simAddr, "PROVIDERSIM_KEY_RETENTION=" + r.keys.Retention.String(),
			"PROVIDERSIM_MP_KEY_RETENTION=" + r.mpKeys.Retention.String(), "PROVIDERSIM_MP_SEARCH_LAG=0s"}}
	r.procs = append(r.procs, r.sim)
	return r.sim.start(ctx)
}

// startService sets the environment of the payments processes, creates
// the account and starts the replicas.
func (r *runner) startService(ctx context.Context) error {
	serviceURL := r.dbURL
	if r.cfg.Pooler != nil {
		var err error
		if serviceURL, err = r.cfg.Pooler(r.dbURL); err != nil {
			return fmt.Errorf("chaos: pooler: %w", err)
		}
		r.say("replicas reach the database through %s", serviceURL)
	}
	if !r.cfg.NoDBFaults && r.cfg.Failover == nil {
		var err error
		if r.dbf, serviceURL, err = startDBFaults(serviceURL); err != nil {
			return err
		}
		r.say("replicas reach the database through a fault proxy on %s", r.dbf.px.Addr())
	}
	r.adminToken = randomHex(32)
	r.baseEnv = []string{
		"DATABASE_URL=" + serviceURL, "MIGRATE_DATABASE_URL=" + r.dbURL, "STRIPE_API_BASE=" + r.stripeFront,
		"ENCRYPTION_KEY=" + base64.StdEncoding.EncodeToString([]byte(randomHex(16))),
		"PROVIDER_TIMEOUT=" + providerTimeout.String(), "IN_PROGRESS_LEASE=" + inProgressLease.String(),
		"RECONCILE_INTERVAL=" + reconcileEvery.String(), "RECONCILE_AFTER=" + reconcileAfter.String(),
		"RECONCILE_MAX_BACKOFF=" + reconcileMaxBackoff.String(),
		"PROVIDER_SEARCH_GRACE=" + searchGrace.String(), "LOG_LEVEL=" + r.cfg.LogLevel, "ADMIN_TOKEN=" + r.adminToken,
		"PROVIDER_KEY_RETENTION=" + r.keys.Retention.String(),
		"MERCADOPAGO_API_BASE=" + r.mpFront, "MERCADOPAGO_KEY_RETENTION=" + r.mpKeys.Retention.String(),
		"PROVIDER_CIRCUIT_FAILURES=" + fmt.Sprint(circuitFailures), "PROVIDER_CIRCUIT_COOLDOWN=" + circuitCooldown.String(),
		"MERCADOPAGO_SEARCH_GRACE=" + searchGrace.String(),
		// The merchant's endpoint is on this machine.
		"WEBHOOK_ALLOW_PRIVATE=true",
	}
	if err := r.createAccount(ctx); err != nil {
		return err
	}
	if err := r.startReplicas(ctx); err != nil {
		return err
	}
	return r.addStripe(ctx)
}

// runPayments runs the payments binary once with the service's environment,
// its stderr appended to the log logName, and returns its stdout.
func (r *runner) runPayments(ctx context.Context, logName string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.paymentsBin, args...)
	cmd.Env = append(os.Environ(), r.baseEnv...)
	lf, err := r.openLog(logName)
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

// createAccount creates the account with its Mercado Pago access token and
// webhook secret; addStripe adds Stripe's after them, so that Mercado Pago
// is the account's first provider and takes its Pix.
func (r *runner) createAccount(ctx context.Context) error {
	r.secretKey, r.whsec = "sk_test_chaos_"+randomHex(12), "whsec_"+randomHex(16)
	r.mpToken, r.mpSecret = "TEST-chaos-"+randomHex(12), randomHex(16)
	acctOut, err := r.runPayments(ctx, "accounts", "accounts", "create", "--name", "chaos",
		"--mercadopago-access-token", r.mpToken, "--mercadopago-webhook-secret", r.mpSecret)
	if err != nil {
		return fmt.Errorf("chaos: payments accounts create: %w (log: %s)", err, filepath.Join(r.logDir, "accounts.log"))
	}
	var acct struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(acctOut, &acct); err != nil || acct.APIKey == "" {
		return fmt.Errorf("chaos: accounts create printed %q", acctOut)
	}
	r.acctID, r.apiKey = acct.ID, acct.APIKey
	return nil
}

// addStripe gives the account its Stripe secret key and webhook secret
// through the admin API (PUT /admin/v1/accounts/{id}/providers/stripe).
func (r *runner) addStripe(ctx context.Context) error {
	body, _ := json.Marshal(map[string]string{"stripe_secret_key": r.secretKey, "webhook_secret": r.whsec,
		"actor": "chaos", "reason": "the run's Stripe credentials"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, r.urls[0]+"/admin/v1/accounts/"+r.acctID+"/providers/stripe", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("chaos: add Stripe to the account: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("chaos: add Stripe to the account: %s %s", resp.Status, b)
	}
	r.say("account %s: providers mercadopago, stripe", r.acctID)
	return nil
}

// startReplicas starts the replicas, each on its own address, all on one
// database.
func (r *runner) startReplicas(ctx context.Context) error {
	r.replicas = make([]*proc, r.cfg.Replicas)
	r.urls = make([]string, r.cfg.Replicas)
	for i := range r.replicas {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		lf, err := r.openLog(fmt.Sprintf("replica-%d", i))
		if err != nil {
			return err
		}
		r.replicas[i] = &proc{name: fmt.Sprintf("replica-%d", i), bin: r.paymentsBin, args: []string{"serve"},
			env: append(append([]string{}, r.baseEnv...), "HTTP_ADDR="+addr), addr: addr, health: "/healthz", log: lf}
		r.procs = append(r.procs, r.replicas[i])
		if err := r.replicas[i].start(ctx); err != nil {
			return err
		}
		r.urls[i] = r.replicas[i].url()
	}
	r.say("simulator on %s, replicas on %s; logs in %s", r.sim.url(), strings.Join(r.urls, " "), r.logDir)
	return nil
}

// prepare registers the merchant's endpoint and turns the simulator's
// random faults on.
func (r *runner) prepare(ctx context.Context) error {
	if err := r.shop.register(ctx, r.urls[0], r.apiKey); err != nil {
		return err
	}
	r.say("merchant webhook endpoint on %s", r.shop.url)
	r.say("provider key retention %s at the replicas and the simulator: margin %s, re-send window %s; Mercado Pago's %s", r.keys.Retention, r.keys.Margin, r.keys.Window, r.mpKeys)

	r.ctl = &http.Client{Timeout: 30 * time.Second}
	return simControl(ctx, r.ctl, http.MethodPost, r.sim.url()+"/_sim/random-faults", map[string]any{
		"drop": dropShare, "error_500": error500, "delay": delayShare, "delay_for": delayFor.String(), "seed": int64(r.cfg.Seed),
	})
}

// setFatal keeps the first error that must end the run.
func (r *runner) setFatal(err error) {
	r.fatalMu.Lock()
	if r.fatal == nil {
		r.fatal = err
	}
	r.fatalMu.Unlock()
}

// drive runs the clients, the webhooks, the kills, the revocations and the
// database's failover or restart for the run's duration. It also starts the
// delivery of the webhooks, which goes on until deliverCtx ends and then
// closes the returned channel.
func (r *runner) drive(ctx, deliverCtx context.Context) (<-chan struct{}, error) {
	cfg, rep := r.cfg, r.rep
	runID := "ord-" + randomHex(3)
	r.fleet = newFleet(r.urls, r.sim.url(), r.apiKey, runID)
	r.hooks = newWebhooks(r.sim.url(), r.secretKey, r.whsec, r.mpToken, r.mpSecret, r.acctID, r.urls, cfg.Seed)
	r.creds = newRotation(r.sim.url(), r.secretKey, r.mpToken)
	r.outages = newOutages(r.sim.url())
	runCtx, stopRun := context.WithTimeout(ctx, cfg.Duration)
	// The fleet returns only once runCtx is done.
	defer stopRun()
	var wg sync.WaitGroup
	start := time.Now()
	r.say("running for %s", cfg.Duration)
	wg.Add(7)
	go func() { defer wg.Done(); r.fleet.run(runCtx, cfg.Clients, cfg.Seed) }()
	go func() {
		defer wg.Done()
		if r.dbf != nil {
			r.dbf.run(runCtx, cfg.DBFaultEvery, cfg.Seed)
		}
	}()
	go func() {
		defer wg.Done()
		if err := r.outages.run(runCtx, cfg.OutageEvery, cfg.Seed); err != nil {
			r.setFatal(err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := r.creds.run(runCtx, cfg.RevokeEvery, cfg.Seed); err != nil {
			r.setFatal(err)
		}
	}()
	go func() { defer wg.Done(); r.hooks.generate(runCtx) }()
	go func() { defer wg.Done(); r.killReplicas(ctx, runCtx) }()
	go func() { defer wg.Done(); r.watch(ctx, runCtx, start) }()
	deliverDone := make(chan struct{})
	go func() { defer close(deliverDone); r.hooks.deliver(deliverCtx, false) }()
	wg.Wait()
	rep.Kills, rep.Restarts, rep.PGRestarts = int(r.kills.Load()), int(r.restarts.Load()), int(r.pgRestarts.Load())
	rep.FailoverRecovery, rep.FailoverFailed = r.fleet.failoverFigures()
	if rep.Failovers > 0 && rep.FailoverRecovery == 0 {
		rep.NotRecovered = 1
	}
	rep.Revocations, rep.Revoked = r.creds.snapshot()
	rep.Outages, rep.OutageTime = r.outages.snapshot()
	if r.dbf != nil {
		rep.DBFaults, rep.DBProxy = r.dbf.figures()
	}
	if r.fatal != nil {
		return deliverDone, r.fatal
	}
	r.say("run over after %s; secret key restored; stopping faults, keeping replica-0 up, reconciling", time.Since(start).Round(time.Second))
	return deliverDone, nil
}

// killReplicas SIGKILLs a random replica a mean of KillEvery apart and
// restarts it after a moment, until runCtx ends.
func (r *runner) killReplicas(ctx, runCtx context.Context) {
	rng := mrand.New(mrand.NewPCG(r.cfg.Seed, 0xdead))
	for {
		sleep(runCtx, r.cfg.KillEvery/2+time.Duration(rng.Int64N(int64(r.cfg.KillEvery))))
		if runCtx.Err() != nil {
			return
		}
		p := r.replicas[rng.IntN(len(r.replicas))]
		p.kill()
		r.kills.Add(1)
		// Down for a moment, as a crashed pod is before its restart.
		time.Sleep(300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond))))
		if err := restartProc(ctx, p); err != nil {
			r.setFatal(err)
			return
		}
		r.restarts.Add(1)
	}
}

// watch disturbs the database at 45% of the run and prints the progress
// every 15 s, until runCtx ends.
func (r *runner) watch(ctx, runCtx context.Context, start time.Time) {
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	pgAt := time.After(r.cfg.Duration * 45 / 100)
	for {
		select {
		case <-runCtx.Done():
			return
		case <-pgAt:
			if !r.disturbDatabase(ctx) {
				return
			}
		case <-tick.C:
			r.fleet.mu.Lock()
			t := r.fleet.t
			r.fleet.mu.Unlock()
			revocations, _ := r.creds.snapshot()
			r.say("t=%s orders %d, final %d, requests %d, kills %d, revocations %d", time.Since(start).Round(time.Second),
				t.Orders, t.FinalOrders, t.Requests, r.kills.Load(), revocations)
		}
	}
}

// disturbDatabase fails the server over, or restarts the private cluster,
// as the run asks. It returns false when that failed and the run must end.
func (r *runner) disturbDatabase(ctx context.Context) bool {
	if r.cfg.Failover != nil {
		r.say("failing over: stopping the primary (immediate)")
		var at time.Time
		if err := r.cfg.Failover(ctx, func() { at = time.Now(); r.fleet.markFailover(at) }); err != nil {
			r.setFatal(fmt.Errorf("chaos: failover: %w", err))
			return false
		}
		r.rep.Failovers++
		r.rep.FailoverPromoted = time.Since(at)
		r.say("failover: the standby accepts writes %s after the primary stopped", r.rep.FailoverPromoted.Round(10*time.Millisecond))
		return true
	}
	if r.pg == nil || !r.cfg.RestartPostgres {
		return true
	}
	r.say("restarting PostgreSQL (immediate shutdown)")
	if err := r.pg.restart(ctx); err != nil {
		r.setFatal(err)
		return false
	}
	r.pgRestarts.Add(1)
	return true
}

// settle quiesces the run: no more faults, one replica, the late webhooks
// drained, and reconciles until nothing is unresolved.
func (r *runner) settle(ctx context.Context, stopDeliver func(), deliverDone <-chan struct{}) error {
	if err := simControl(ctx, r.ctl, http.MethodDelete, r.sim.url()+"/_sim/faults", nil); err != nil {
		return err
	}
	if err := simControl(ctx, r.ctl, http.MethodPost, r.sim.url()+"/_sim/random-faults", map[string]any{"drop": 0, "error_500": 0, "delay": 0}); err != nil {
		return err
	}
	if !r.replicas[0].running() {
		if err := restartProc(ctx, r.replicas[0]); err != nil {
			return err
		}
	}
	for _, p := range r.replicas[1:] {
		p.stop()
	}
	stopDeliver()
	<-deliverDone
	// The changes since the last poll, a Pix paid at the end among them.
	r.hooks.poll(ctx)
	r.hooks.setReplicas(r.urls[:1])
	drainCtx, stopDrain := context.WithTimeout(ctx, 60*time.Second)
	defer stopDrain()
	drained := make(chan struct{})
	go func() { defer close(drained); r.hooks.deliver(drainCtx, true) }()
	r.reconcile(ctx)
	<-drained
	return nil
}

// reconcile runs `payments reconcile --once` until nothing is unresolved,
// with a bound.
func (r *runner) reconcile(ctx context.Context) {
	for pass := 1; pass <= maxPasses; pass++ {
		r.rep.Passes = pass
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		sum, rerr := r.runPayments(pctx, "reconcile", "reconcile", "--once")
		cancel()
		np, na, nr, uerr := unresolved(ctx, r.dbURL)
		if rerr != nil || uerr != nil {
			r.say("reconcile pass %d: %v %v", pass, rerr, uerr)
		} else {
			r.say("reconcile pass %d: %s -> unresolved payments %d, attempts %d, refunds %d", pass, bytes.TrimSpace(sum), np, na, nr)
		}
		if rerr == nil && uerr == nil && np+na+nr == 0 {
			break
		}
		sleep(ctx, time.Second)
	}
}

// awaitFeed waits for every event of the feed to reach the merchant and
// returns the feed with what the merchant received. A delivery cut short
// by the last kill is retried once River rescues it (notify.RescueAfter
// after its attempt, on a rescuer pass every 30 s).
func (r *runner) awaitFeed(ctx context.Context) (feed []string, got map[string]int, bad []string, err error) {
	// The feed serves an event only once every older transaction on the
	// server has ended, so it is read again until it stops growing.
	awaitCtx, stopAwait := context.WithTimeout(ctx, notify.RescueAfter+90*time.Second)
	waited := time.Now()
	for {
		again, err := r.shop.feed(ctx, r.urls[0], r.apiKey, 100)
		if err != nil {
			stopAwait()
			return nil, nil, nil, err
		}
		if feed != nil && len(again) == len(feed) {
			break
		}
		feed = again
		r.shop.await(awaitCtx, feed)
		if awaitCtx.Err() != nil {
			break
		}
	}
	stopAwait()
	got, bad = r.shop.snapshot()
	r.say("merchant webhooks: %d events in the feed, %d ids received, waited %s", len(feed), len(got), time.Since(waited).Round(time.Second))
	return feed, got, bad, nil
}

// figures reads the feeds, the server's xid8, the provider's records and
// the database, and checks the invariants on them.
func (r *runner) figures(ctx context.Context, server string, feed []string, got map[string]int, bad []string) error {
	rep := r.rep
	stored, reads, err := readFeeds(ctx, r.shop, r.urls[0], r.apiKey, r.dbURL, r.acctID)
	if err != nil {
		return err
	}
	if rep.Xid.End, err = pgxid.Current(ctx, server); err != nil {
		return err
	}
	rep.Xid.Crossed = pgxid.Crossed(rep.Xid.Start, rep.Xid.End)
	r.say("xid8: %s", rep.Xid)

	recs, err := simRecords(ctx, r.ctl, r.sim.url(), r.secretKey, r.mpToken)
	if err != nil {
		return err
	}
	if err := simGet(ctx, r.ctl, r.sim.url()+"/_sim/stats", &rep.Sim); err != nil {
		return err
	}
	var reqs []providersim.Request
	if err := simGet(ctx, r.ctl, r.sim.url()+"/_sim/requests", &reqs); err != nil {
		return err
	}
	if rep.CircuitOpenings, err = r.circuitOpenings(); err != nil {
		return err
	}
	rep.Faults = map[providersim.FaultKind]int{}
	for _, q := range reqs {
		if q.Fault != "" {
			rep.Faults[q.Fault]++
		}
	}
	st, err := loadLocalState(ctx, r.dbURL)
	if err != nil {
		return err
	}
	rep.check(recs, st, r.fleet)
	rep.checkMerchant(feed, got, bad)
	rep.checkFeed(stored, reads)
	rep.checkRaces(reqs)
	rep.checkResends(reqs, r.keys, r.mpKeys)
	rep.checkNoEffect(reqs, recs, st)
	if err := r.checkHistories(ctx, stored, reads, recs, reqs, st); err != nil {
		return err
	}
	var byProvider map[string]int
	if rep.ResolvedByLookup, byProvider, err = resolvedByLookup(r.logDir, st); err != nil {
		return err
	}
	for prov, n := range byProvider {
		rep.of(prov).Lookups += n
	}
	var hookSurprises []string
	rep.Webhooks, hookSurprises = r.hooks.snapshot()
	rep.Unexpected += len(hookSurprises)
	for _, s := range hookSurprises {
		rep.sample("unexpected webhook answer: %s", s)
	}
	return nil
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
