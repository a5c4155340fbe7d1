-- name: AttemptNextNumber :one
SELECT (COALESCE(MAX(number), 0) + 1)::integer AS next
FROM attempts
WHERE account_id = @account_id AND order_id = @order_id AND operation = @operation;

-- name: AttemptInsert :one
INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status,
                      request, lease_expires_at, created_at, updated_at)
VALUES (@id, @account_id, @payment_id, @order_id, @operation, @number, @provider_key, 'processing',
        @request, @lease_expires_at, @now, @now)
RETURNING *;

-- name: AttemptGetByID :one
SELECT * FROM attempts WHERE id = @id;

-- name: AttemptListByPayment :many
SELECT * FROM attempts WHERE payment_id = @payment_id ORDER BY created_at, number;

-- name: AttemptSetLease :exec
UPDATE attempts SET lease_expires_at = @lease_expires_at, updated_at = @now WHERE id = @id;

-- name: AttemptUpdateOutcome :one
UPDATE attempts
SET status = @status, provider_object_id = COALESCE(@provider_object_id, provider_object_id),
    failure_code = @failure_code, failure_message = @failure_message,
    lease_expires_at = NULL, updated_at = @now
WHERE id = @id
RETURNING *;

-- Any number of reconcilers may run: each claims a batch by taking a lease
-- on rows nobody holds, skipping rows another transaction has locked.
-- name: AttemptClaimUnresolved :many
UPDATE attempts
SET lease_expires_at = @lease_until
WHERE id IN (
    SELECT id FROM attempts a
    WHERE a.status IN ('processing', 'unknown')
      AND (a.lease_expires_at IS NULL OR a.lease_expires_at < @now)
      AND a.updated_at < @updated_before
    ORDER BY a.updated_at
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: AttemptClaimByID :one
UPDATE attempts
SET lease_expires_at = @lease_until
WHERE id = (
    SELECT id FROM attempts a
    WHERE a.id = @id AND a.status IN ('processing', 'unknown')
      AND (a.lease_expires_at IS NULL OR a.lease_expires_at < @now)
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: AttemptListUnresolvedByPayment :many
SELECT * FROM attempts
WHERE payment_id = @payment_id AND status IN ('processing', 'unknown')
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
