// Package reconcile resolves payments whose provider outcome is unknown by
// asking the provider, never by charging again. It runs inside `payments
// serve` every RECONCILE_INTERVAL and as `payments reconcile --once` for
// cron; any number of instances may run at once.
package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Metrics observes reconciliation, by provider name.
type Metrics interface {
	// ReconcileRun is one pass: the attempts it examined and those it left
	// unresolved, by provider (a provider with none is absent).
	ReconcileRun(examined, stillUnknown map[string]int)
	ReconcileResolution(provider, status string)
	// ReconcileNeedsAttention is the number of attempts unresolved for
	// longer than AlertAfter, by provider, after a pass.
	ReconcileNeedsAttention(byProvider map[string]int)
}

// Config wires a Reconciler.
type Config struct {
	Payments *payment.Service
	Store    Store
	Accounts payment.Accounts
	// Now is the service's clock (time.Now by default).
	Now     payment.Clock
	Logger  *slog.Logger
	Metrics Metrics
	// After is RECONCILE_AFTER: attempts younger than this are left to the
	// request that owns them, and the first pause between two tries (0:
	// none, every pass tries every unresolved attempt).
	After time.Duration
	// MaxBackoff is RECONCILE_MAX_BACKOFF: the longest pause between two
	// tries of one attempt.
	MaxBackoff time.Duration
	// AlertAfter is RECONCILE_ALERT_AFTER: an attempt unresolved for longer
	// is logged as a warning on every try and counted in the metric.
	AlertAfter time.Duration
	// Interval is RECONCILE_INTERVAL.
	Interval time.Duration
	// Rate is RECONCILE_RATE: the attempts a pass takes per second, each
	// one provider lookup (a poll that finds a Pix or Boleto expired adds
	// its cancel), so a backlog is worked through at a pace that leaves
	// the provider's rate limit to the API. 0: no limit.
	Rate float64
	// Jitter returns a number in [0, 1) that spreads retries; math/rand by
	// default.
	Jitter func() float64
	// Tracer, when set, makes each attempt a pass resolves a trace of its
	// own; nil: none.
	Tracer trace.TracerProvider
}

// Reconciler claims unresolved attempts and resolves them.
type Reconciler struct {
	cfg  Config
	last atomic.Pointer[Pass]
	// pace spaces the claims of every pass of this process, on the wall
	// clock: the provider's limits are about real time.
	pace   *rate.Limiter
	tracer trace.Tracer // nil: tracing off
}

// Pass is how a reconciliation pass of this process ended.
type Pass struct {
	At      time.Time
	Summary Summary
	// Failed: the pass stopped on an error before it finished.
	Failed bool
}

// LastPass is this process's last pass; false before the first. Each
// instance knows only its own passes.
func (r *Reconciler) LastPass() (Pass, bool) {
	p := r.last.Load()
	if p == nil {
		return Pass{}, false
	}
	return *p, true
}

// New checks the configuration.
func New(c Config) (*Reconciler, error) {
	if c.Payments == nil || c.Store == nil || c.Accounts == nil {
		return nil, errors.New("reconcile: payments, store and accounts are required")
	}
	if c.Now == nil {
		c.Now = payment.NewClock(nil)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Interval <= 0 {
		c.Interval = 30 * time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = time.Hour
	}
	if c.AlertAfter <= 0 {
		c.AlertAfter = time.Hour
	}
	if c.Jitter == nil {
		c.Jitter = rand.Float64
	}
	if c.Rate < 0 {
		return nil, errors.New("reconcile: rate must not be negative")
	}
	pace := rate.NewLimiter(rate.Inf, 1)
	if c.Rate > 0 {
		// A burst of one: the calls are spread evenly, never bunched.
		pace = rate.NewLimiter(rate.Limit(c.Rate), 1)
	}
	r := &Reconciler{cfg: c, pace: pace}
	if c.Tracer != nil {
		r.tracer = c.Tracer.Tracer("github.com/acmepay/payments/internal/reconcile")
	}
	return r, nil
}

// Backoff is the pause before the next try of an attempt the reconciler
// has claimed tries times: After doubled on each try, capped at max, with
// equal jitter (between half and all of it) so that attempts stuck by one
// outage do not all come due together. jitter is in [0, 1).
func Backoff(tries int, after, maxBackoff time.Duration, jitter float64) time.Duration {
	if after <= 0 {
		return 0 // RECONCILE_AFTER=0: no pause at all
	}
	d := maxBackoff
	if tries < 1 {
		tries = 1
	}
	if shift := tries - 1; shift < 32 && after<<shift > 0 && after<<shift < maxBackoff {
		d = after << shift
	}
	return d/2 + time.Duration(jitter*float64(d/2))
}

// Summary is what one pass did; `reconcile --once` prints it.
type Summary struct {
	Examined     int            `json:"examined"`
	Resolved     map[string]int `json:"resolved"`
	StillUnknown int            `json:"still_unknown"`
	// NeedsAttention is logged and exposed as a metric; the printed
	// summary keeps the contract's three fields.
	NeedsAttention int `json:"-"`
}

// RunOnce makes one pass over every attempt that is due. It claims one
// attempt at a time, with a lease that covers that attempt's call only, so
// a slow provider never lets a lease lapse on work still queued behind it.
// Each claim sets the attempt's next due time, so an attempt still unknown
// is tried again only after its backoff, never twice in one pass. Claims
// are paced at Rate: the wait comes before the claim, so it never eats
// into a lease; a context whose deadline comes before the next turn ends
// the pass there, with that error.
func (r *Reconciler) RunOnce(ctx context.Context) (sum Summary, err error) {
	defer func() { r.last.Store(&Pass{At: r.cfg.Now(), Summary: sum, Failed: err != nil}) }()
	sum = Summary{Resolved: map[string]int{}}
	examined, unknown := map[string]int{}, map[string]int{} // by provider
	seen := map[string]bool{}
	start := r.cfg.Now()
	due := Due{UpdatedBefore: start.Add(-r.cfg.After), Before: start}
	for ctx.Err() == nil {
		if err := r.pace.Wait(ctx); err != nil {
			return sum, err
		}
		a, err := r.ClaimNext(ctx, due, func(tries int) time.Time {
			return r.cfg.Now().Add(Backoff(tries, r.cfg.After, r.cfg.MaxBackoff, r.cfg.Jitter()))
		})
		if errors.Is(err, payment.ErrNotFound) {
			break
		}
		if err != nil {
			return sum, err
		}
		if seen[a.ID] {
			break
		}
		seen[a.ID] = true
		sum.Examined++
		prov := payment.ProviderOf(a.Provider)
		examined[prov]++
		// Every line about this attempt names it, its payment and account.
		actx := logging.WithPayment(ctx, a.AccountID, a.PaymentID)
		logging.SetAttempt(actx, a.ID, prov)
		acct, err := r.cfg.Accounts.Merchant(actx, a.AccountID)
		if err != nil {
			return sum, err
		}
		res, err := r.traced(actx, acct, a)
		if err != nil {
			return sum, err
		}
		switch {
		case res.ByOther:
		case res.Waiting && !res.Resolved:
			// Polled on its own schedule: it waits for the customer.
		case res.Resolved:
			sum.Resolved[res.Status]++
			if r.cfg.Metrics != nil {
				r.cfg.Metrics.ReconcileResolution(prov, res.Status)
			}
		default:
			sum.StillUnknown++
			unknown[prov]++
		}
		log := []slog.Attr{slog.String("attempt_id", a.ID), slog.String("payment_id", a.PaymentID), slog.String("provider", prov),
			slog.String("operation", string(a.Operation)), slog.Bool("resolved", res.Resolved), slog.String("status", res.Status),
			slog.Int("tries", a.ReconcileTries)}
		if !res.Resolved && !res.ByOther && !res.Waiting && r.cfg.Now().Sub(a.CreatedAt) > r.cfg.AlertAfter {
			r.cfg.Logger.LogAttrs(actx, slog.LevelWarn, "attempt needs attention: unresolved past RECONCILE_ALERT_AFTER",
				append(log, slog.Time("created_at", a.CreatedAt), slog.Any("next_try_at", a.NextReconcileAt))...)
		} else {
			r.cfg.Logger.LogAttrs(actx, slog.LevelInfo, "reconciled", log...)
		}
	}
	attention, err := r.AttemptCountNeedingAttentionByProvider(ctx)
	if err != nil {
		return sum, err
	}
	for _, n := range attention {
		sum.NeedsAttention += n
	}
	if r.cfg.Metrics != nil {
		r.cfg.Metrics.ReconcileRun(examined, unknown)
		r.cfg.Metrics.ReconcileNeedsAttention(attention)
	}
	return sum, nil
}

// traced resolves a claimed attempt for a pass, in a span of its own when
// tracing is on: its provider call and transactions are its children.
func (r *Reconciler) traced(ctx context.Context, acct payment.Account, a *payment.Attempt) (Resolution, error) {
	if r.tracer == nil {
		return r.Attempt(ctx, acct, a, "reconciler", "")
	}
	ctx, span := r.tracer.Start(ctx, "reconcile.attempt", trace.WithAttributes(attribute.String("attempt_id", a.ID),
		attribute.String("payment_id", a.PaymentID), attribute.String("account_id", a.AccountID)))
	defer span.End()
	res, err := r.Attempt(ctx, acct, a, "reconciler", "")
	span.SetAttributes(attribute.Bool("resolved", res.Resolved), attribute.String("status", res.Status))
	if err != nil {
		span.SetStatus(codes.Error, "not reconciled")
	}
	return res, err
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
		if sum.Examined > 0 || sum.NeedsAttention > 0 {
			r.cfg.Logger.InfoContext(ctx, "reconcile pass", slog.Int("examined", sum.Examined),
				slog.Any("resolved", sum.Resolved), slog.Int("still_unknown", sum.StillUnknown),
				slog.Int("needs_attention", sum.NeedsAttention))
		}
	}
}
