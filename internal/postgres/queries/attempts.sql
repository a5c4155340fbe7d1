-- name: AttemptNextNumber :one
SELECT (COALESCE(MAX(number), 0) + 1)::integer AS next
FROM attempts
WHERE account_id = @account_id AND order_id = @order_id AND operation = @operation;

-- name: AttemptInsert :exec
INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status,
                      request, lease_expires_at, provider, created_at, updated_at)
VALUES (@id, @account_id, @payment_id, @order_id, @operation, @number, @provider_key, 'processing',
        @request, @lease_expires_at, @provider, @now, @now);

-- name: AttemptGetByID :one
SELECT * FROM attempts WHERE id = @id;

-- name: AttemptListByPayment :many
SELECT * FROM attempts WHERE payment_id = @payment_id ORDER BY created_at, number;

-- name: AttemptSetLease :exec
UPDATE attempts SET lease_expires_at = @lease_expires_at, updated_at = @now WHERE id = @id;

-- name: AttemptUpdateOutcome :exec
UPDATE attempts
SET status = @status, provider_object_id = COALESCE(@provider_object_id, provider_object_id),
    failure_code = @failure_code, failure_message = @failure_message,
    lease_expires_at = NULL, updated_at = @now,
    -- A waiting attempt is polled on its own schedule, which starts when
    -- it begins to wait.
    reconcile_tries = CASE WHEN status <> 'waiting' AND @status = 'waiting' THEN 0 ELSE reconcile_tries END,
    next_reconcile_at = CASE WHEN @status = 'waiting' THEN sqlc.narg(next_reconcile_at)::timestamptz ELSE next_reconcile_at END
WHERE id = @id;

-- Any number of reconcilers may run: each locks the next due attempt that
-- nobody holds, skipping rows another transaction has locked, then leases
-- it and sets its next due time (AttemptScheduleClaim) in the same
-- transaction. Never claimed: due once untouched since updated_before.
-- Claimed before: due when its next time came before the pass began, so a
-- pass never claims an attempt twice. A waiting attempt always has its
-- next time. The last condition follows from the one before it; written on
-- the due time itself it bounds the scan of attempts_due, so a claim that
-- finds nothing due stops at the pass's start instead of reading every
-- attempt still waiting for its turn (a backlog of 100,000 made the last
-- claim of every pass read them all).
-- name: AttemptLockNextDue :one
SELECT * FROM attempts a
WHERE a.status IN ('processing', 'unknown', 'waiting')
  AND (a.lease_expires_at IS NULL OR a.lease_expires_at < @now)
  AND ((a.next_reconcile_at IS NULL AND a.updated_at < @updated_before)
       OR a.next_reconcile_at < @due_before)
  AND COALESCE(a.next_reconcile_at, a.updated_at) < GREATEST(@updated_before, @due_before)
ORDER BY COALESCE(a.next_reconcile_at, a.updated_at)
LIMIT 1
FOR UPDATE SKIP LOCKED;

-- name: AttemptScheduleClaim :one
UPDATE attempts
SET lease_expires_at = @lease_until, reconcile_tries = reconcile_tries + 1,
    next_reconcile_at = @next_reconcile_at
WHERE id = @id
RETURNING *;

-- Unresolved attempts older than the alert age: they need a person.
-- name: AttemptCountNeedingAttentionByProvider :many
SELECT provider, count(*) AS attempts FROM attempts
WHERE status IN ('processing', 'unknown') AND created_at < @created_before
GROUP BY provider;

-- name: AttemptClaimByID :one
UPDATE attempts
SET lease_expires_at = @lease_until
WHERE id = (
    SELECT id FROM attempts a
    WHERE a.id = @id AND a.status IN ('processing', 'unknown', 'waiting')
      AND (a.lease_expires_at IS NULL OR a.lease_expires_at < @now)
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: AttemptListUnresolvedByPayment :many
SELECT * FROM attempts
WHERE payment_id = @payment_id AND status IN ('processing', 'unknown', 'waiting')
ORDER BY created_at;

-- name: AttemptLatestByPayment :one
SELECT * FROM attempts
WHERE payment_id = @payment_id AND operation = @operation
ORDER BY number DESC
LIMIT 1;

-- name: AttemptCountUnresolvedByPaymentOps :one
SELECT count(*) FROM attempts
WHERE payment_id = @payment_id AND status IN ('processing', 'unknown')
  AND operation = ANY(@operations::text[]);

-- An unresolved cancel of one of an order's payments that ended declined or
-- failed: that payment's intent may still be payable, so the order takes no
-- next attempt until the cancel settles. Read through the unique index on
-- (account_id, order_id, operation, number).
-- name: AttemptCancelHoldingOrder :one
SELECT a.payment_id FROM attempts a
JOIN payments p ON p.id = a.payment_id
WHERE a.account_id = @account_id AND a.order_id = @order_id AND a.operation = 'cancelar'
  AND a.status IN ('processing', 'unknown')
  AND p.status IN ('declined', 'failed')
LIMIT 1;
