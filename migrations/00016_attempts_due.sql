-- +goose Up
-- The reconciler's claim walks unresolved attempts (processing, unknown and
-- waiting) in due order, COALESCE(next_reconcile_at, updated_at). The older
-- partial indexes each cover only part of those statuses, so the claim
-- scanned the whole attempts table on every claim.
CREATE INDEX attempts_due ON attempts ((COALESCE(next_reconcile_at, updated_at)))
    WHERE status IN ('processing', 'unknown', 'waiting');

-- +goose Down
DROP INDEX attempts_due;
