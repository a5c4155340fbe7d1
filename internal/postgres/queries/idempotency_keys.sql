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

-- IdempotencyKeyReserve of a numbered mutation (a create), answering in
-- the same statement what its transaction reads next: the order's next
-- attempt number of the operation and the account's enabled webhook
-- endpoints (WebhookEndpointsEnabled as JSON), both as of this
-- statement's snapshot. No row when the scope already has a key.
-- name: IdempotencyKeyReserveNumbered :one
INSERT INTO idempotency_keys (account_id, operation, key_hash, fingerprint, body_hash, state, lease_expires_at,
                              payment_id, attempt_id, created_at, updated_at)
VALUES (@account_id, @operation, @key_hash, @fingerprint, @body_hash, 'in_progress', @lease_expires_at,
        @payment_id, @attempt_id, @now, @now)
ON CONFLICT (account_id, operation, key_hash) DO NOTHING
RETURNING id,
    (SELECT (COALESCE(MAX(a.number), 0) + 1)::integer FROM attempts a
     WHERE a.account_id = @account_id AND a.order_id = @order_id AND a.operation = @attempt_operation)::integer AS next_attempt,
    (SELECT COALESCE(json_agg(json_build_object('id', e.id, 'events', e.enabled_events) ORDER BY e.id), '[]')
     FROM webhook_endpoints e
     WHERE e.account_id = @account_id AND e.status = 'enabled' AND e.deleted_at IS NULL)::json AS endpoints;

-- What recording a provider's answer locks, in the order every path
-- locks: the key, then the payment; with the account's enabled webhook
-- endpoints as IdempotencyKeyReserveNumbered reads them. The attempt is
-- not read here: a row not locked by this statement would come from its
-- snapshot, taken before any wait for the locks.
-- name: IdempotencyKeyGetForUpdateWithPayment :one
SELECT sqlc.embed(k), sqlc.embed(p),
    (SELECT COALESCE(json_agg(json_build_object('id', e.id, 'events', e.enabled_events) ORDER BY e.id), '[]')
     FROM webhook_endpoints e
     WHERE e.account_id = @account_id AND e.status = 'enabled' AND e.deleted_at IS NULL)::json AS endpoints
FROM idempotency_keys k
JOIN payments p ON p.account_id = k.account_id AND p.id = @payment_id
WHERE k.account_id = @account_id AND k.operation = @operation AND k.key_hash = @key_hash
FOR UPDATE OF k, p;
