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
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/acmepay/payments/internal/app"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/telemetry"
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
	switch args[0] {
	case "accounts":
		return accountsCommand(ctx, args[1:], getenv, stdout, stderr)
	case "operators":
		return operatorsCommand(ctx, args[1:], getenv, stdout, stderr)
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
		if len(args) == 2 {
			return printMigrationStatus(ctx, db, stdout)
		}
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

// appConfig is the composition root's view of the settings; log nil keeps
// it quiet.
func (c config) appConfig(log *slog.Logger) app.Config {
	return app.Config{
		DatabaseURL: c.DatabaseURL, MigrateDatabaseURL: c.MigrateDatabaseURL,
		WebhookAllowPrivate: c.WebhookAllowPrivate, AdminToken: c.AdminToken,
		MetricsElsewhere: c.MetricsAddr != "", TrustedProxies: c.TrustedProxies,
		StripeAPIBase: c.StripeAPIBase, ProviderRetries: app.DefaultProviderRetries,
		EncryptionKey: c.EncryptionKey, EncryptionKeyPrevious: c.EncryptionKeyPrevious,
		ProviderTimeout: c.ProviderTimeout, InProgressLease: c.InProgressLease,
		CreateBudget: c.HTTPWriteTimeout, CircuitFailures: c.CircuitFailures, CircuitCooldown: c.CircuitCooldown,
		ProviderKeyRetention: c.ProviderKeyRetention, ProviderSearchGrace: c.ProviderSearchGrace,
		MercadoPagoKeyRetention: c.MercadoPagoKeyRetention, MercadoPagoAPIBase: c.MercadoPagoAPIBase, MercadoPagoSearchGrace: c.MercadoPagoSearchGrace,
		ReconcileInterval: c.ReconcileInterval, ReconcileAfter: c.ReconcileAfter,
		ReconcileMaxBackoff: c.ReconcileMaxBackoff, ReconcileAlertAfter: c.ReconcileAlertAfter, ReconcileRate: c.ReconcileRate,
		ResponseTTL: c.ResponseTTL, TombstoneTTL: c.TombstoneTTL, PurgeInterval: c.PurgeInterval,
		AuditInterval: c.AuditInterval, AuditWindow: c.AuditWindow, AuditRate: c.AuditRate,
		DBStatementTimeout: c.DBStatementTimeout, DBLockTimeout: c.DBLockTimeout,
		DBIdleInTransactionTimeout: c.DBIdleInTransactionTimeout,
		Logger:                     log,
	}
}

// openDB opens the pool, every session bounded by the DB_* timeouts.
func openDB(ctx context.Context, cfg config) (*postgres.DB, error) {
	return app.OpenDB(ctx, cfg.appConfig(nil))
}

// migrate applies the migrations through MIGRATE_DATABASE_URL: db itself
// when it is DATABASE_URL, a connection of its own otherwise.
func migrate(ctx context.Context, cfg config, db *postgres.DB) error {
	return app.Migrate(ctx, cfg.appConfig(nil), db)
}

// printMigrationStatus prints one line a migration: state, when applied,
// file.
func printMigrationStatus(ctx context.Context, db *postgres.DB, stdout io.Writer) error {
	all, err := postgres.MigrationStatus(ctx, db)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, m := range all {
		switch {
		case m.Source == "":
			fmt.Fprintf(w, "newer\t-\tversion %d, applied by a newer release\n", m.Version)
		case m.Applied:
			fmt.Fprintf(w, "applied\t%s\t%s\n", m.AppliedAt.UTC().Format(time.RFC3339), m.Source)
		default:
			fmt.Fprintf(w, "pending\t-\t%s\n", m.Source)
		}
	}
	return w.Flush()
}

// reconcileOnce is one pass for a cron job: the JSON summary on stdout,
// logs on stderr.
func reconcileOnce(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer) error {
	a, err := app.New(ctx, cfg.appConfig(log))
	if err != nil {
		return err
	}
	defer a.Close()
	sum, err := a.Reconciler.RunOnce(ctx)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(sum)
}

// auditOnce is one audit pass for a cron job or an operator: the JSON
// summary on stdout, logs on stderr. since 0 means AUDIT_WINDOW.
func auditOnce(ctx context.Context, cfg config, log *slog.Logger, stdout io.Writer, since time.Duration) error {
	a, err := app.New(ctx, cfg.appConfig(log))
	if err != nil {
		return err
	}
	defer a.Close()
	sum, err := a.Operations.Audit(ctx, since)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(sum)
}

// serve runs until ctx is canceled (SIGTERM), then drains in-flight
// requests and stops the workers.
func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	tp, flushTraces, err := telemetry.Start(ctx, cfg.Tracing, serviceVersion())
	if err != nil {
		return err
	}
	defer func() {
		// The spans of the drained requests are sent before exit.
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := flushTraces(fctx); err != nil {
			log.Warn("traces not flushed", slog.String("error", err.Error()))
		}
	}()
	acfg := cfg.appConfig(log)
	acfg.TracerProvider = tp
	a, err := app.New(ctx, acfg)
	if err != nil {
		return err
	}
	defer a.Close()
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
	if err := a.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	hs := newHTTPServer(cfg, a.Handler())
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
	a.Stop()
	log.Info("stopped")
	return err
}

// serveMetrics serves /metrics alone on METRICS_ADDR, when it is set, and
// returns its stop.
func serveMetrics(cfg config, a *app.App, log *slog.Logger) (func(), error) {
	if cfg.MetricsAddr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.MetricsHandler())
	hs := newHTTPServer(cfg, mux)
	go func() { _ = hs.Serve(ln) }()
	log.Info("serving metrics", slog.String("addr", ln.Addr().String()))
	return func() { _ = hs.Close() }, nil
}
