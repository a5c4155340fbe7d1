package postgres

import (
	"context"
	"time"

	"github.com/acmepay/payments/internal/postgres/internal/dbsqlc"
	"github.com/acmepay/payments/internal/retention"
)

// RetentionStore implements retention.Store. Each call is one statement in
// its own implicit transaction, touching at most limit rows, so the purge
// never holds row locks for longer than one short batch.
type RetentionStore struct{ db *DB }

// NewRetentionStore returns the retention store on db.
func NewRetentionStore(db *DB) *RetentionStore { return &RetentionStore{db: db} }

var _ retention.Store = (*RetentionStore)(nil)

// IdempotencyKeyPurgeResponses turns up to limit completed keys whose completed_at is
// before completedBefore into tombstones purged at now, and returns how many.
func (s *RetentionStore) IdempotencyKeyPurgeResponses(ctx context.Context, completedBefore, now time.Time, limit int) (int, error) {
	n, err := s.db.q.IdempotencyKeyPurgeResponses(ctx, dbsqlc.IdempotencyKeyPurgeResponsesParams{
		Now: now, CompletedBefore: completedBefore, MaxRows: int32(limit)})
	return int(n), translate(err)
}

// IdempotencyKeyDeleteTombstones deletes up to limit tombstones purged before
// purgedBefore, and returns how many.
func (s *RetentionStore) IdempotencyKeyDeleteTombstones(ctx context.Context, purgedBefore time.Time, limit int) (int, error) {
	n, err := s.db.q.IdempotencyKeyDeleteTombstones(ctx, dbsqlc.IdempotencyKeyDeleteTombstonesParams{
		PurgedBefore: purgedBefore, MaxRows: int32(limit)})
	return int(n), translate(err)
}
