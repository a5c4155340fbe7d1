-- Records a difference the audit found: a new open discrepancy, or the open
-- one of the payment and kind with its sides and last_checked_at refreshed
-- (first_seen_at kept). Nothing is written when an operator already resolved
-- this exact difference (same provider side): the audit does not re-open it.
-- name: DiscrepancyUpsert :one
INSERT INTO discrepancies (id, account_id, payment_id, kind, ours, theirs, status, first_seen_at, last_checked_at)
SELECT @id, @account_id, @payment_id, @kind, @ours, @theirs, 'open', @now, @now
WHERE NOT EXISTS (
    SELECT 1 FROM discrepancies d
    WHERE d.payment_id = @payment_id AND d.kind = @kind AND d.status = 'resolved' AND d.theirs = @theirs::jsonb)
ON CONFLICT (payment_id, kind) WHERE status = 'open'
DO UPDATE SET ours = EXCLUDED.ours, theirs = EXCLUDED.theirs, last_checked_at = EXCLUDED.last_checked_at
RETURNING *;

-- name: DiscrepancyGetByID :one
SELECT * FROM discrepancies WHERE id = @id;

-- name: DiscrepancyGetByIDForUpdate :one
SELECT * FROM discrepancies WHERE id = @id FOR UPDATE;

-- Paged by id, which grows with time.
-- name: DiscrepancyList :many
SELECT * FROM discrepancies
WHERE (@status::text = '' OR status = @status::text)
  AND (@payment_id::text = '' OR payment_id = @payment_id::text)
  AND id > @after_id::text
ORDER BY id
LIMIT @max_rows;

-- name: DiscrepancyResolve :one
UPDATE discrepancies
SET status = 'resolved', resolved_at = @now, resolved_by = @actor, resolution = @resolution
WHERE id = @id AND status = 'open'
RETURNING *;

-- name: DiscrepancyCountOpen :one
SELECT count(*) FROM discrepancies WHERE status = 'open';
