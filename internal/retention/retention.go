// Package retention runs the purge job of the idempotency contract: stored
// responses of completed keys are purged to tombstones after the response
// window, and tombstones are deleted after the tombstone window. Keys whose
// outcome is not known yet (in progress, unknown) are never touched:
// forgetting them could let a retry charge twice.
//
// The work is done in small batches, each its own short statement, so the
// job never holds long locks and any number of instances may run it at once.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// DefaultBatchSize is the number of rows one statement touches when the
// configuration does not say.
const DefaultBatchSize = 500

// Store is the storage the purge job needs. Each call handles at most limit
// rows and returns how many it handled; a result below limit means no more
// rows were eligible (or the rest are locked by someone else).
type Store interface {
	// IdempotencyKeyPurgeResponses turns completed keys whose completed_at is before
	// completedBefore into tombstones: response status and body removed,
	// purged_at set to now; scope, fingerprint and payment id kept.
	IdempotencyKeyPurgeResponses(ctx context.Context, completedBefore, now time.Time, limit int) (int, error)
	// IdempotencyKeyDeleteTombstones deletes tombstones purged before purgedBefore.
	IdempotencyKeyDeleteTombstones(ctx context.Context, purgedBefore time.Time, limit int) (int, error)
}

// Config configures a Purger.
type Config struct {
	// Store is required.
	Store Store
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// ResponseTTL is IDEMPOTENCY_RESPONSE_TTL: how long after completion a
	// stored response is replayed byte for byte.
	ResponseTTL time.Duration
	// TombstoneTTL is IDEMPOTENCY_TOMBSTONE_TTL: how long a tombstone is
	// kept after its response was purged.
	TombstoneTTL time.Duration
	// Interval is the time between runs of Run.
	Interval time.Duration
	// BatchSize is the number of rows per statement; DefaultBatchSize when 0.
	BatchSize int
	// Logger receives one line per run; discarded when nil.
	Logger *slog.Logger
}

// Purger applies the retention windows to idempotency keys.
type Purger struct {
	store        Store
	now          func() time.Time
	responseTTL  time.Duration
	tombstoneTTL time.Duration
	interval     time.Duration
	batchSize    int
	log          *slog.Logger
}

// New checks cfg and returns a Purger.
func New(cfg Config) (*Purger, error) {
	if cfg.Store == nil {
		return nil, errors.New("retention: store is required")
	}
	if cfg.ResponseTTL <= 0 || cfg.TombstoneTTL <= 0 || cfg.Interval <= 0 {
		return nil, fmt.Errorf("retention: response TTL (%s), tombstone TTL (%s) and interval (%s) must be positive",
			cfg.ResponseTTL, cfg.TombstoneTTL, cfg.Interval)
	}
	if cfg.BatchSize < 0 {
		return nil, fmt.Errorf("retention: batch size %d is negative", cfg.BatchSize)
	}
	p := &Purger{
		store: cfg.Store, now: cfg.Now, responseTTL: cfg.ResponseTTL, tombstoneTTL: cfg.TombstoneTTL,
		interval: cfg.Interval, batchSize: cfg.BatchSize, log: cfg.Logger,
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.batchSize == 0 {
		p.batchSize = DefaultBatchSize
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

// Result counts the rows one run handled.
type Result struct {
	// Purged is the number of stored responses turned into tombstones.
	Purged int
	// Deleted is the number of tombstones deleted.
	Deleted int
}

// PurgeOnce purges every expired stored response, then deletes every expired
// tombstone, batch by batch. On error the result counts what was done before
// it; the next run picks up the rest.
func (p *Purger) PurgeOnce(ctx context.Context) (Result, error) {
	// One instant for the whole run, so the cutoffs do not drift while it
	// works through the batches.
	now := p.now().UTC()
	var res Result
	var err error
	res.Purged, err = p.drain(ctx, func(ctx context.Context) (int, error) {
		return p.store.IdempotencyKeyPurgeResponses(ctx, now.Add(-p.responseTTL), now, p.batchSize)
	})
	if err != nil {
		return res, fmt.Errorf("retention: purge responses: %w", err)
	}
	res.Deleted, err = p.drain(ctx, func(ctx context.Context) (int, error) {
		return p.store.IdempotencyKeyDeleteTombstones(ctx, now.Add(-p.tombstoneTTL), p.batchSize)
	})
	if err != nil {
		return res, fmt.Errorf("retention: delete tombstones: %w", err)
	}
	return res, nil
}

// drain repeats batch until a batch comes back short.
func (p *Purger) drain(ctx context.Context, batch func(context.Context) (int, error)) (int, error) {
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := batch(ctx)
		total += n
		if err != nil {
			return total, err
		}
		if n < p.batchSize {
			return total, nil
		}
	}
}

// Run purges once at start, so an instance that restarts more often than
// Interval still purges, and then every Interval until ctx is done. Errors
// are logged and the next tick tries again.
func (p *Purger) Run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		p.runLogged(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Purger) runLogged(ctx context.Context) {
	start := time.Now()
	res, err := p.PurgeOnce(ctx)
	attrs := []slog.Attr{
		slog.Int("purged", res.Purged), slog.Int("deleted", res.Deleted),
		slog.Int64("duration_ms", time.Since(start).Milliseconds()),
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// Shutting down: not a failure.
	case err != nil:
		p.log.LogAttrs(ctx, slog.LevelError, "idempotency retention failed", append(attrs, slog.String("error", err.Error()))...)
	default:
		p.log.LogAttrs(ctx, slog.LevelInfo, "idempotency retention", attrs...)
	}
}
