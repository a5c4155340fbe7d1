package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/metrics"
	"github.com/acmepay/payments/internal/notify"
	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/postgres"
)

// Start runs the background work of serve: webhook deliveries, the
// provider-account backfill, the audit, the reconciler, the purger and the
// database metrics. They run until Stop, whatever ctx does later.
func (a *App) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopWorkers != nil {
		return errors.New("app: already started")
	}
	stop, err := a.startDeliveries(ctx)
	if err != nil {
		return err
	}
	a.stopDeliveries = stop
	workers, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.stopWorkers = cancel
	log := a.log
	for _, run := range []func(){
		func() { recordProviderAccounts(workers, a.Accounts, log) },
		func() { runAudit(workers, a.Operations, or(a.cfg.AuditInterval, DefaultAuditInterval), log) },
		func() { a.Reconciler.Run(workers) },
		func() { a.Purger.Run(workers) },
		func() { a.Metrics.RunDatabaseRefresh(workers, metrics.DatabaseRefreshInterval, log) },
	} {
		a.workers.Go(run)
	}
	return nil
}

// Stop ends what Start started and waits for it; in-flight deliveries
// are given notify.Timeout to finish.
func (a *App) Stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopWorkers == nil {
		return
	}
	a.stopWorkers()
	a.workers.Wait()
	a.stopDeliveries()
	a.stopWorkers, a.stopDeliveries = nil, nil
}

// startDeliveries runs the webhook delivery worker (River) and returns
// its stop. River's notifier and leader election hold a session, so it
// runs on MigrateDatabaseURL, the direct URL; when that is DatabaseURL
// itself it runs poll-only, which a transaction pooler also allows. A
// delivery cut short by the stop (or a crash) is worked again: at least
// once.
func (a *App) startDeliveries(ctx context.Context) (func(), error) {
	cfg, log := a.cfg, a.log
	// A pool of its own, with the timeouts at connection start: River's
	// statements do not carry them as the service's own do.
	db, err := postgres.Open(ctx, cfg.MigrateDatabaseURL, postgres.WithSessionTimeouts(
		cfg.DBStatementTimeout, cfg.DBLockTimeout, cfg.DBIdleInTransactionTimeout), postgres.AtConnectionStart(),
		postgres.WithTracing(cfg.TracerProvider))
	if err != nil {
		return nil, fmt.Errorf("MIGRATE_DATABASE_URL: %w", err)
	}
	pollOnly := cfg.MigrateDatabaseURL == cfg.DatabaseURL
	client, err := postgres.NewRiverWorker(db, postgres.RiverWorkerConfig{Worker: a.WebhookWorker,
		PollOnly: pollOnly, MaxWorkers: deliveryWorkers, Logger: log})
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		db.Close()
		return nil, fmt.Errorf("webhook deliveries: %w", err)
	}
	return func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), notify.Timeout+5*time.Second)
		defer cancel()
		if err := client.Stop(stopCtx); err != nil {
			log.Warn("webhook deliveries: stop", slog.String("error", err.Error()))
		}
		db.Close()
	}, nil
}

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

// runAudit audits every interval until ctx ends. A failed pass is logged
// and the next one tries again.
func runAudit(ctx context.Context, audit *operations.Service, interval time.Duration, log *slog.Logger) {
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
