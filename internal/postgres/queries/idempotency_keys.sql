-- name: IdempotencyKeyGet :one
SELECT * FROM idempotency_keys
WHERE account_id = @account_id AND operation = @operation AND key_hash = @key_hash;

-- name: IdempotencyKeyGetForUpdate :one
SELECT * FROM idempotency_keys
WHERE account_id = @account_id AND operation = @operation AND key_hash = @key_hash
FOR UPDATE;

-- Concurrent inserts of one scope wait on the unique index for the first
-- transaction; the losers get no row and fall back to reading the winner's.
-- name: IdempotencyKeyReserve :one
INSERT INTO idempotency_keys (account_id, operation, key_hash, fingerprint, body_hash, state, lease_expires_at,
                              payment_id, attempt_id, created_at, updated_at)
VALUES (@account_id, @operation, @key_hash, @fingerprint, @body_hash, 'in_progress', @lease_expires_at,
        @payment_id, @attempt_id, @now, @now)
ON CONFLICT (account_id, operation, key_hash) DO NOTHING
RETURNING *;

-- name: IdempotencyKeyTakeLease :exec
UPDATE idempotency_keys
SET state = 'in_progress', lease_expires_at = @lease_expires_at, updated_at = @now
WHERE id = @id;

-- name: IdempotencyKeyMarkUnknown :exec
UPDATE idempotency_keys
SET state = 'unknown', lease_expires_at = NULL, updated_at = @now
WHERE id = @id AND state <> 'completed';

-- name: IdempotencyKeyComplete :exec
UPDATE idempotency_keys
SET state = 'completed', lease_expires_at = NULL, response_kind = @response_kind, response_status = @response_status,
    response_body = @response_body, completed_at = @now, updated_at = @now
WHERE id = @id;

-- A request that completes without starting the attempt its key was
-- reserved for (an ops replay adopting an outcome found at the provider)
-- refers to its payment only: the reserved attempt id was never written.
-- name: IdempotencyKeyDetachAttempt :exec
UPDATE idempotency_keys SET attempt_id = NULL WHERE id = @id;

-- name: IdempotencyKeyGetByAttemptForUpdate :one
SELECT * FROM idempotency_keys WHERE attempt_id = @attempt_id FOR UPDATE;

-- A failover: the key now waits on the attempt at the next provider.
-- name: IdempotencyKeyMoveAttempt :exec
UPDATE idempotency_keys SET attempt_id = @attempt_id, lease_expires_at = @lease_expires_at, updated_at = @now
WHERE id = @id;
