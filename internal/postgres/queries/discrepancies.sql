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

-- Closes an open discrepancy. A refund settled later keeps the actor and
-- the time of the resolve that sent it.
-- name: DiscrepancyResolve :one
UPDATE discrepancies
SET status = 'resolved', resolved_at = @now, resolved_by = COALESCE(resolution_actor, @actor::text),
    resolution = @resolution, resolution_status = 'succeeded',
    resolution_actor = COALESCE(resolution_actor, @actor::text), resolution_at = COALESCE(resolution_at, @now),
    claim_key_hash = NULL, claimed_until = NULL
WHERE id = @id AND status = 'open'
RETURNING *;

-- Claims an open discrepancy for one resolve (by its key's hash) before
-- any provider call. No row: it is resolved, has a refund in flight, or
-- another resolve's claim is still live.
-- name: DiscrepancyClaim :one
UPDATE discrepancies
SET claim_key_hash = @key_hash, claimed_until = @until
WHERE id = @id AND status = 'open'
  AND (resolution_status IS NULL OR resolution_status NOT IN ('processing', 'unknown'))
  AND (claimed_until IS NULL OR claimed_until <= @now OR claim_key_hash = @key_hash)
RETURNING *;

-- Records the refund a resolve sent: the discrepancy stays open and held
-- until the refund settles.
-- name: DiscrepancyStartRefund :one
UPDATE discrepancies
SET resolution = 'refund', resolution_status = 'processing', resolution_refund_id = @refund_id,
    resolution_actor = @actor, resolution_reason = @reason, resolution_at = @now, resolution_adopt = @adopt,
    claim_key_hash = NULL, claimed_until = NULL
WHERE id = @id AND status = 'open'
RETURNING *;

-- name: DiscrepancyByRefundForUpdate :one
SELECT * FROM discrepancies WHERE resolution_refund_id = @refund_id FOR UPDATE;

-- name: DiscrepancySetResolutionStatus :one
UPDATE discrepancies SET resolution_status = @resolution_status
WHERE id = @id AND status = 'open'
RETURNING *;

-- name: DiscrepancyCountOpen :one
SELECT count(*) FROM discrepancies WHERE status = 'open';

-- Ends a resolve's claim that led nowhere, so another may resolve at once.
-- name: DiscrepancyReleaseClaim :exec
UPDATE discrepancies SET claim_key_hash = NULL, claimed_until = NULL
WHERE id = @id AND claim_key_hash = @key_hash;
