// Command payments is the payment orchestration service: the HTTP API with
// its background workers (serve), schema migrations (migrate), account
// administration (accounts …) and a local receiver of its webhooks
// (webhooks listen); `payments --help` lists every command.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/acmepay/payments/api"
	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/authlimit"
	"github.com/acmepay/payments/internal/console"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/metrics"
	"github.com/acmepay/payments/internal/notify"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/provider/stripe"
	"github.com/acmepay/payments/internal/reconcile"
	"github.com/acmepay/payments/internal/retention"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "payments:", err)
		if isUsageError(err) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if done, err := withoutSettings(ctx, args, getenv, stdout, stderr); done {
		return err
	}
	if args[0] == "accounts" {
		return accountsCommand(ctx, args[1:], getenv, stdout, stderr)
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := logging.New(stderr, cfg.LogLevel)
	switch args[0] {
	case "serve":
		return serve(ctx, cfg, log)
	case "migrate":
		db, err := openDB(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := migrate(ctx, cfg, db); err != nil {
			return err
		}
		log.Info("migrations applied")
		return nil
	case "reconcile":
		if len(args) >= 2 && args[1] == "--audit" {
			fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
			fs.Bool("audit", true, "")
			since := fs.Duration("since", 0, "")
			if err := parseFlags(fs, args[1:]); err != nil {
				return err
			}
			if *since < 0 {
				return usageErrorf("reconcile: --since must be a positive Go duration such as 24h")
			}
			return auditOnce(ctx, cfg, log, stdout, *since)
		}
		if len(args) != 2 || args[1] != "--once" {
			return usageErrorf("reconcile: --once or --audit [--since D] is required (usage: payments reconcile --once | --audit [--since D])")
		}
		return reconcileOnce(ctx, cfg, log, stdout)
	}
	return usageErrorf("unknown command %q", args[0])
}

// openDB opens the pool, every session bounded by the DB_* timeouts.
func openDB(ctx context.Context, cfg config) (*postgres.DB, error) {
	return postgres.Open(ctx, cfg.DatabaseURL, postgres.WithSessionTimeouts(
		cfg.DBStatementTimeout, cfg.DBLockTimeout, cfg.DBIdleInTransactionTimeout))
}

// migrate applies the migrations through MIGRATE_DATABASE_URL: db itself
// when it is DATABASE_URL, a connection of its own otherwise.
func migrate(ctx context.Context, cfg config, db *postgres.DB) error {
	if cfg.MigrateDatabaseURL == cfg.DatabaseURL {
		return postgres.Migrate(ctx, db)
	}
	mdb, err := postgres.Open(ctx, cfg.MigrateDatabaseURL, postgres.WithSessionTimeouts(
		cfg.DBStatementTimeout, cfg.DBLockTimeout, cfg.DBIdleInTransactionTimeout))
	if err != nil {
		return fmt.Errorf("MIGRATE_DATABASE_URL: %w", err)
	}
	defer mdb.Close()
	return postgres.Migrate(ctx, mdb)
}

// app is the wired service.
type app struct {
	db         *postgres.DB
	metrics    *metrics.Metrics
	payments   *payment.Service
	accounts   *account.Service
	reconciler *reconcile.Reconciler
	purger     *retention.Purger
	audit      *payment.Discrepancies
	webhooks   *notify.Service
}

func wire(ctx context.Context, cfg config, log *slog.Logger) (*app, error) {
	db, err := openDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, cfg, db); err != nil {
		db.Close()
		return nil, err
	}
	if cfg.InProgressLease <= cfg.ProviderTimeout {
		// Still safe: a retry taking over while the holder calls re-sends the
		// same provider key, which the provider answers once. But it turns
		// slow calls into needless unknowns.
		log.Warn("IN_PROGRESS_LEASE is not longer than PROVIDER_TIMEOUT; retries may take over calls still in flight",
			slog.Duration("lease", cfg.InProgressLease), slog.Duration("provider_timeout", cfg.ProviderTimeout))
	}
	a := &app{db: db}
	store := postgres.NewPaymentStore(db)
	a.metrics = metrics.New(store.CountByStatus, func(ctx context.Context) (int64, time.Duration, error) {
		return store.EventBacklog(ctx, time.Now())
	}, store.EventFeedLag)
	a.metrics.Registry.MustRegister(db.Collector())
	if a.payments, err = payment.NewService(payment.Config{
		Store:    store,
		Provider: stripe.New(stripe.Config{APIBase: cfg.StripeAPIBase, MaxNetworkRetries: 2, Logger: log}),
		Logger:   log, Metrics: a.metrics,
		ProviderTimeout: cfg.ProviderTimeout, Lease: cfg.InProgressLease,
		KeyRetention: cfg.ProviderKeyRetention, SearchGrace: cfg.ProviderSearchGrace,
		AlertAfter: cfg.ReconcileAlertAfter,
	}); err != nil {
		db.Close()
		return nil, err
	}
	if a.accounts, err = openAccounts(ctx, db, cfg, log); err != nil {
		db.Close()
		return nil, err
	}
	if a.audit, err = payment.NewDiscrepancies(payment.DiscrepancyConfig{Payments: a.payments, Store: store,
		Accounts: a.accounts, Logger: log, Window: cfg.AuditWindow, Rate: cfg.AuditRate}); err != nil {
		db.Close()
		return nil, err
	}
	a.metrics.CountOpenDiscrepancies(a.audit.CountOpen)
	hooks := postgres.NewWebhookStore(db)
	a.metrics.WatchWebhookDeliveries(func(ctx context.Context) (metrics.WebhookDeliveryState, error) {
		return hooks.DeliveryState(ctx, time.Now())
	})
	if a.webhooks, err = notify.NewService(hooks, a.accounts,
		notify.Guard{AllowPrivate: cfg.WebhookAllowPrivate}, nil); err != nil {
		db.Close()
		return nil, err
	}
	if a.reconciler, err = reconcile.New(reconcile.Config{Payments: a.payments, Accounts: a.accounts, Logger: log,
		Metrics: a.metrics, After: cfg.ReconcileAfter, Interval: cfg.ReconcileInterval,
		MaxBackoff: cfg.ReconcileMaxBackoff, AlertAfter: cfg.ReconcileAlertAfter}); err != nil {
		db.Close()
		return nil, err
	}
	if a.purger, err = retention.New(retention.Config{Store: postgres.NewRetentionStore(db), Logger: log,
		ResponseTTL: cfg.ResponseTTL, TombstoneTTL: cfg.TombstoneTTL, Interval: cfg.PurgeInterval}); err != nil {
		db.Close()
		return nil, err
	}
	return a, nil
}

// reconcileOnce is one pass for a cron job: the JSON summary on stdout,
// logs on stderr.
func reconcileOnce(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	a, err := wire(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.db.Close()
	sum, err := a.reconciler.RunOnce(ctx)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(sum)
}

// auditOnce is one audit pass for a cron job or an operator: the JSON
// summary on stdout, logs on stderr. since 0 means AUDIT_WINDOW.
func auditOnce(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer, since time.Duration) error {
	a, err := wire(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.db.Close()
	sum, err := a.audit.Audit(ctx, since)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(sum)
}

// runAudit audits every interval until ctx ends. A failed pass is logged
// and the next one tries again.
func runAudit(ctx context.Context, audit *payment.Discrepancies, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sum, err := audit.Audit(ctx, 0)
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "audit pass failed", slog.String("error", err.Error()))
			}
			continue
		}
		log.InfoContext(ctx, "audit pass", slog.Int("examined", sum.Examined), slog.Int("new", sum.New), slog.Int("skipped", sum.Skipped),
			slog.Int("lookups_failed", sum.LookupsFailed))
	}
}

// serve runs until ctx is canceled (SIGTERM), then drains in-flight
// requests and stops the workers.
func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	a, err := wire(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.db.Close()
	srv, err := newAPI(cfg, a, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return err
	}
	stopMetrics, err := serveMetrics(cfg, a, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopMetrics()
	deliveries, err := startDeliveries(ctx, cfg, a, log)
	if err != nil {
		ln.Close()
		return err
	}
	workers, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(5)
	go func() { defer wg.Done(); recordProviderAccounts(workers, a.accounts, log) }()
	go func() { defer wg.Done(); runAudit(workers, a.audit, cfg.AuditInterval, log) }()
	go func() { defer wg.Done(); a.reconciler.Run(workers) }()
	go func() { defer wg.Done(); a.purger.Run(workers) }()
	go func() { defer wg.Done(); a.metrics.RunDatabaseRefresh(workers, metrics.DatabaseRefreshInterval, log) }()

	hs := newHTTPServer(cfg, srv.Handler())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("listening", slog.String("addr", ln.Addr().String()))
	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("draining in-flight requests")
		// In-flight provider calls finish and record their outcome: a
		// request cut short here would leave its payment unknown.
		shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ProviderTimeout+5*time.Second)
		defer cancel()
		if err = hs.Shutdown(shutdownCtx); err != nil {
			err = fmt.Errorf("shutdown: %w", err)
		}
	}
	stopWorkers()
	wg.Wait()
	deliveries()
	log.Info("stopped")
	return err
}

// newAPI wires the HTTP API and, with an admin token, the console: one
// count of failed admin authentications serves both doors.
func newAPI(cfg config, a *app, log *slog.Logger) (*api.Server, error) {
	limiter := authlimit.New(authlimit.Config{TrustedProxies: cfg.TrustedProxies})
	var con http.Handler
	if cfg.AdminToken != "" {
		c, err := console.New(console.Config{Payments: a.payments, Accounts: a.accounts, Discrepancies: a.audit, Store: postgres.NewConsoleStore(a.db),
			Logger: log, AdminToken: cfg.AdminToken, AuthLimiter: limiter, LastPass: a.reconciler.LastPass})
		if err != nil {
			return nil, err
		}
		con = c.Handler()
	}
	return api.New(api.Config{Payments: a.payments, Accounts: a.accounts, Ready: a.db, Metrics: a.metrics,
		Logger: log, AdminToken: cfg.AdminToken, AuthLimiter: limiter, NoMetrics: cfg.MetricsAddr != "",
		Console: con, Discrepancies: a.audit, Webhooks: a.webhooks})
}

// serveMetrics serves /metrics alone on METRICS_ADDR, when it is set, and
// returns its stop.
// recordProviderAccounts asks, once per start, which provider account each
// account registered before registration asked belongs to (see
// account.Service.RecordProviderAccounts).
func recordProviderAccounts(ctx context.Context, accounts *account.Service, log *slog.Logger) {
	sum, err := accounts.RecordProviderAccounts(ctx, log)
	if err != nil && ctx.Err() == nil {
		log.Warn("recording provider accounts stopped; the next start resumes", slog.String("error", err.Error()))
	}
	if sum.Examined > 0 {
		log.Info("provider accounts recorded", slog.Int("examined", sum.Examined), slog.Int("recorded", sum.Recorded),
			slog.Int("shared", sum.Shared), slog.Int("unanswered", sum.Unanswered))
	}
}

func serveMetrics(cfg config, a *app, log *slog.Logger) (func(), error) {
	if cfg.MetricsAddr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", api.MetricsHandler(a.metrics))
	hs := newHTTPServer(cfg, mux)
	go func() { _ = hs.Serve(ln) }()
	log.Info("serving metrics", slog.String("addr", ln.Addr().String()))
	return func() { _ = hs.Close() }, nil
}

// startDeliveries runs the webhook delivery worker (River) and returns
// its stop. River's notifier and leader election hold a session, so it
// runs on MIGRATE_DATABASE_URL, the direct URL; when that is DATABASE_URL
// itself it runs poll-only, which a transaction pooler also allows. A
// delivery cut short by the stop (or a crash) is worked again: at least
// once.
func startDeliveries(ctx context.Context, cfg config, a *app, log *slog.Logger) (func(), error) {
	worker, err := notify.NewWorker(postgres.NewWebhookStore(a.db), a.accounts,
		notify.Guard{AllowPrivate: cfg.WebhookAllowPrivate}, nil)
	if err != nil {
		return nil, err
	}
	worker.Metrics = a.metrics
	// A pool of its own, with the timeouts at connection start: River's
	// statements do not carry them as the service's own do.
	db, err := postgres.Open(ctx, cfg.MigrateDatabaseURL, postgres.WithSessionTimeouts(
		cfg.DBStatementTimeout, cfg.DBLockTimeout, cfg.DBIdleInTransactionTimeout), postgres.AtConnectionStart())
	if err != nil {
		return nil, fmt.Errorf("MIGRATE_DATABASE_URL: %w", err)
	}
	pollOnly, closeDB := cfg.MigrateDatabaseURL == cfg.DatabaseURL, db.Close
	client, err := postgres.NewRiverWorker(db, postgres.RiverWorkerConfig{Worker: worker, PollOnly: pollOnly, MaxWorkers: 10, Logger: log})
	if err != nil {
		closeDB()
		return nil, err
	}
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		closeDB()
		return nil, fmt.Errorf("webhook deliveries: %w", err)
	}
	return func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), notify.Timeout+5*time.Second)
		defer cancel()
		if err := client.Stop(stopCtx); err != nil {
			log.Warn("webhook deliveries: stop", slog.String("error", err.Error()))
		}
		closeDB()
	}, nil
}
