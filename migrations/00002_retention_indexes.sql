-- The tombstone window is measured from completed_at, like the response
-- window, so the purge job finds expired tombstones by completed_at; the index
-- on purged_at served no query. Built concurrently: idempotency_keys is on
-- the money path and holds a tombstone for every key of the last 400 days, and
-- a plain CREATE INDEX would block key reservations while it builds. No IF NOT
-- EXISTS on the build: a failed concurrent build leaves an invalid index,
-- which must be dropped and rebuilt rather than silently kept.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY idempotency_keys_tombstones ON idempotency_keys (completed_at)
    WHERE purged_at IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_purged;

-- +goose Down
CREATE INDEX CONCURRENTLY idempotency_keys_purged ON idempotency_keys (purged_at)
    WHERE purged_at IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_tombstones;
