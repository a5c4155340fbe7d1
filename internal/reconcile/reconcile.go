// Package reconcile resolves payments whose provider outcome is unknown by
// asking the provider, never by charging again. It runs inside `payments
// serve` every RECONCILE_INTERVAL and as `payments reconcile --once` for
// cron; any number of instances may run at once.
package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/payment"
)

// Metrics observes reconciliation.
type Metrics interface {
	ReconcileRun(examined, stillUnknown int)
	ReconcileResolution(status string)
}

// Config wires a Reconciler.
type Config struct {
	Payments *payment.Service
	Accounts payment.Accounts
	Logger   *slog.Logger
	Metrics  Metrics
	// After is RECONCILE_AFTER: attempts younger than this are left to the
	// request that owns them.
	After time.Duration
	// Interval is RECONCILE_INTERVAL.
	Interval time.Duration
	// BatchSize bounds one claim; a pass claims until nothing is left.
	BatchSize int
}

// Reconciler claims unresolved attempts and resolves them.
type Reconciler struct {
	cfg Config
}

// New checks the configuration.
func New(c Config) (*Reconciler, error) {
	if c.Payments == nil || c.Accounts == nil {
		return nil, errors.New("reconcile: payments and accounts are required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 50
	}
	if c.Interval <= 0 {
		c.Interval = 30 * time.Second
	}
	return &Reconciler{cfg: c}, nil
}

// Summary is what one pass did; `reconcile --once` prints it.
type Summary struct {
	Examined     int            `json:"examined"`
	Resolved     map[string]int `json:"resolved"`
	StillUnknown int            `json:"still_unknown"`
}

// RunOnce makes one pass over every claimable attempt. An attempt is
// claimed at most once per pass, so one still unknown is not retried in a
// tight loop: the pass only claims attempts untouched since it began minus
// After, and examining an attempt touches it. A claimed attempt that is not
// examined would stay leased, and its client's retry refused as in use,
// until the lease expired.
func (r *Reconciler) RunOnce(ctx context.Context) (Summary, error) {
	sum := Summary{Resolved: map[string]int{}}
	seen := map[string]bool{}
	cutoff := r.cfg.Payments.Now().Add(-r.cfg.After)
	for {
		batch, err := r.cfg.Payments.ClaimUnresolved(ctx, cutoff, r.cfg.BatchSize)
		if err != nil {
			return sum, err
		}
		fresh := 0
		for _, a := range batch {
			if seen[a.ID] {
				continue
			}
			seen[a.ID] = true
			fresh++
			sum.Examined++
			acct, err := r.cfg.Accounts.Payer(ctx, a.AccountID)
			if err != nil {
				return sum, err
			}
			res, err := r.cfg.Payments.ReconcileAttempt(ctx, acct, a, "reconciler", "")
			if err != nil {
				return sum, err
			}
			switch {
			case res.ByOther:
			case res.Resolved:
				sum.Resolved[res.Status]++
				if r.cfg.Metrics != nil {
					r.cfg.Metrics.ReconcileResolution(res.Status)
				}
			default:
				sum.StillUnknown++
			}
			r.cfg.Logger.InfoContext(ctx, "reconciled", slog.String("attempt_id", a.ID),
				slog.String("operation", string(a.Operation)), slog.Bool("resolved", res.Resolved), slog.String("status", res.Status))
		}
		if len(batch) < r.cfg.BatchSize || fresh == 0 {
			break
		}
	}
	if r.cfg.Metrics != nil {
		r.cfg.Metrics.ReconcileRun(sum.Examined, sum.StillUnknown)
	}
	return sum, nil
}

// Run passes every Interval until ctx is done. Errors are logged; the next
// pass tries again.
func (r *Reconciler) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sum, err := r.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.cfg.Logger.ErrorContext(ctx, "reconcile pass failed", slog.String("error", err.Error()))
			continue
		}
		if sum.Examined > 0 {
			r.cfg.Logger.InfoContext(ctx, "reconcile pass", slog.Int("examined", sum.Examined),
				slog.Any("resolved", sum.Resolved), slog.Int("still_unknown", sum.StillUnknown))
		}
	}
}
