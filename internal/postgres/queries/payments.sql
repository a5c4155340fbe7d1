-- name: PaymentInsert :exec
INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method,
                      customer_id, description, metadata, method_options, status, provider, created_at, updated_at)
VALUES (@id, @account_id, @order_id, @attempt, @amount, @currency, @capture_method, @payment_method,
        @customer_id, @description, @metadata, @method_options, @status, @provider, @now, @now);

-- name: PaymentGetByID :one
SELECT * FROM payments WHERE account_id = @account_id AND id = @id;

-- Serializes every state change of one payment: the outcome of a provider
-- call, the reconciler and webhooks all go through this lock.
-- name: PaymentGetByIDForUpdate :one
SELECT * FROM payments WHERE account_id = @account_id AND id = @id FOR UPDATE;

-- name: PaymentListByOrder :many
SELECT * FROM payments
WHERE account_id = @account_id AND order_id = @order_id
ORDER BY created_at, attempt
LIMIT @max_rows;

-- name: PaymentGetLiveByOrder :one
SELECT * FROM payments
WHERE account_id = @account_id AND order_id = @order_id
  AND status IN ('processing', 'unknown', 'requires_action', 'pending', 'authorized', 'captured');

-- name: PaymentUpdateState :one
UPDATE payments
SET status = @status, attempt = @attempt, provider_payment_id = @provider_payment_id,
    amount_captured = @amount_captured, amount_refunded = @amount_refunded,
    provider_amount_refunded = @provider_amount_refunded,
    failure_code = @failure_code, failure_message = @failure_message,
    next_action = @next_action, client_secret = @client_secret, action_expires_at = @action_expires_at,
    updated_at = @now, version = version + 1
WHERE id = @id
RETURNING *;

-- PaymentUpdateState of a payment this transaction holds locked at a known
-- version: the new version is that one plus one, so nothing is read back
-- and the update can wait for the next round trip.
-- name: PaymentUpdateStateLocked :exec
UPDATE payments
SET status = @status, attempt = @attempt, provider_payment_id = @provider_payment_id,
    amount_captured = @amount_captured, amount_refunded = @amount_refunded,
    provider_amount_refunded = @provider_amount_refunded,
    failure_code = @failure_code, failure_message = @failure_message,
    next_action = @next_action, client_secret = @client_secret, action_expires_at = @action_expires_at,
    updated_at = @now, version = version + 1
WHERE id = @id;

-- name: PaymentCountByStatus :many
-- The folded counts plus the deltas not folded yet: a few rows each, never
-- the payments table.
SELECT t.status::text AS status_text, sum(t.n)::bigint AS n FROM (
    SELECT c.status, c.n FROM payment_status_counts c
    UNION ALL
    SELECT d.status, d.delta::bigint FROM payment_status_deltas d
) AS t
GROUP BY t.status;

-- name: PaymentStatusCountsFold :exec
-- One statement, so a concurrent count sees the deltas either still in
-- payment_status_deltas or already in payment_status_counts, never both
-- or neither. Concurrent folds skip the deltas another one has deleted.
WITH moved AS (
    DELETE FROM payment_status_deltas RETURNING status, delta
), sums AS (
    SELECT status, sum(delta)::bigint AS n FROM moved GROUP BY status
)
INSERT INTO payment_status_counts (status, n)
SELECT status, n FROM sums
ON CONFLICT (status) DO UPDATE SET n = payment_status_counts.n + EXCLUDED.n;

-- name: PaymentGetAnyAccount :one
SELECT * FROM payments WHERE id = @id;

-- Paged by (updated_at, id); needs_attention marks payments with an attempt
-- still unresolved past the alert age.
-- name: PaymentListStuck :many
SELECT sqlc.embed(p),
       EXISTS (SELECT 1 FROM attempts a
               WHERE a.payment_id = p.id AND a.status IN ('processing', 'unknown')
                 AND a.created_at < @alert_before)::boolean AS needs_attention
FROM payments p
WHERE p.status = ANY(@statuses::text[]) AND p.updated_at < @updated_before
  AND (@account_id::text = '' OR p.account_id = @account_id)
  AND (@after_id::text = '' OR (p.updated_at, p.id) > (@after_at::timestamptz, @after_id::text))
ORDER BY p.updated_at, p.id
LIMIT @max_rows;

-- name: PaymentGetByProviderID :one
SELECT * FROM payments
WHERE account_id = @account_id AND provider_payment_id = @provider_payment_id
ORDER BY created_at DESC
LIMIT 1;

-- The audit's page of final payments changed since a time, by (updated_at, id).
-- name: PaymentListFinalChanged :many
SELECT * FROM payments
WHERE status IN ('authorized', 'captured', 'declined', 'failed', 'canceled')
  AND updated_at >= @since
  AND (@after_id::text = '' OR (updated_at, id) > (@after_at::timestamptz, @after_id::text))
ORDER BY updated_at, id
LIMIT @max_rows;

-- name: PaymentSetDisputes :one
UPDATE payments SET disputes = @disputes, updated_at = @now, version = version + 1 WHERE id = @id
RETURNING version;

-- A create whose provider provably did nothing moves on to the next
-- provider of its route with its next attempt (CONTRACT §15).
-- name: PaymentMoveProvider :exec
UPDATE payments SET provider = @provider, attempt = @attempt, updated_at = @now, version = version + 1
WHERE id = @id;

-- A new payment with its first attempt, in one statement. The attempt is
-- inserted from the payment's row, so the payment goes first: a second
-- live payment of the order is refused before the attempt's number is
-- checked. The attempt's foreign key is checked at the statement's end.
-- name: PaymentInsertWithAttempt :exec
WITH p AS (
    INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method,
                          customer_id, description, metadata, method_options, status, provider, created_at, updated_at)
    VALUES (@id, @account_id, @order_id, @attempt, @amount, @currency, @capture_method, @payment_method,
            @customer_id, @description, @metadata, @method_options, @status, @provider, @now, @now)
    RETURNING payments.id, payments.account_id, payments.order_id
)
INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status,
                      request, lease_expires_at, provider, created_at, updated_at)
SELECT @attempt_id::text, p.account_id, p.id, p.order_id, @operation::text, @number::integer, @provider_key::text,
       'processing', @request::jsonb, sqlc.narg(lease_expires_at)::timestamptz, @attempt_provider::text,
       @attempt_now::timestamptz, @attempt_now::timestamptz
FROM p;

-- AttemptUpdateOutcome and PaymentUpdateStateLocked of one outcome, in one
-- statement.
-- name: AttemptUpdateOutcomeWithPayment :exec
WITH a AS (
    UPDATE attempts
    SET status = @attempt_status::text,
        provider_object_id = COALESCE(sqlc.narg(provider_object_id)::text, attempts.provider_object_id),
        failure_code = sqlc.narg(attempt_failure_code)::text, failure_message = sqlc.narg(attempt_failure_message)::text,
        lease_expires_at = NULL, updated_at = @attempt_now::timestamptz,
        reconcile_tries = CASE WHEN attempts.status <> 'waiting' AND @attempt_status::text = 'waiting' THEN 0 ELSE attempts.reconcile_tries END,
        next_reconcile_at = CASE WHEN @attempt_status::text = 'waiting' THEN sqlc.narg(next_reconcile_at)::timestamptz ELSE attempts.next_reconcile_at END
    WHERE attempts.id = @attempt_id
)
UPDATE payments
SET status = @status, attempt = @attempt, provider_payment_id = @provider_payment_id,
    amount_captured = @amount_captured, amount_refunded = @amount_refunded,
    provider_amount_refunded = @provider_amount_refunded,
    failure_code = @failure_code, failure_message = @failure_message,
    next_action = @next_action, client_secret = @client_secret, action_expires_at = @action_expires_at,
    updated_at = @now, version = version + 1
WHERE payments.id = @id;

-- A failover in one statement, applied only while it holds: the key (not
-- completed) and the payment (still at the provider that failed) are
-- locked in that order, then the failed attempt is failed if it is still
-- unresolved under the lease of the request that sent it and its number is
-- still the order's last; then the payment moves to the next provider, the
-- next attempt is written and the key waits on it, with the audit entry.
-- No row: nothing was written, and the caller records the outcome under
-- the locks instead.
-- name: PaymentFailOver :one
WITH locked AS MATERIALIZED (
    SELECT k.id FROM idempotency_keys k
    JOIN payments p ON p.account_id = k.account_id AND p.id = @payment_id::text
    WHERE k.account_id = @account_id::text AND k.operation = @key_operation::text AND k.key_hash = @key_hash::bytea
      AND k.state <> 'completed' AND p.provider = @from_provider::text
    FOR UPDATE OF k, p
), failed AS (
    UPDATE attempts
    SET status = 'failed', failure_code = NULLIF(@failure_code::text, ''), failure_message = NULLIF(@failure_message::text, ''),
        lease_expires_at = NULL, updated_at = @now::timestamptz
    WHERE attempts.id = @failed_attempt_id::text AND attempts.status IN ('processing', 'unknown', 'waiting')
      AND attempts.lease_expires_at = @failed_lease::timestamptz
      AND EXISTS (SELECT 1 FROM locked)
      AND NOT EXISTS (SELECT 1 FROM attempts n
                      WHERE n.account_id = @account_id::text AND n.order_id = @order_id::text
                        AND n.operation = @operation::text AND n.number >= @number::integer)
    RETURNING attempts.id
), moved AS (
    UPDATE payments SET provider = @provider::text, attempt = @number::integer, updated_at = @now::timestamptz,
        version = payments.version + 1
    WHERE payments.id = @payment_id::text AND EXISTS (SELECT 1 FROM failed)
    RETURNING payments.id
), started AS (
    INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status,
                          request, lease_expires_at, provider, created_at, updated_at)
    SELECT @attempt_id::text, @account_id::text, moved.id, @order_id::text, @operation::text, @number::integer,
           @provider_key::text, 'processing', @request::jsonb, @lease_expires_at::timestamptz, @provider::text,
           @now::timestamptz, @now::timestamptz
    FROM moved
    RETURNING attempts.id
), keyed AS (
    UPDATE idempotency_keys SET attempt_id = started.id, lease_expires_at = @lease_expires_at::timestamptz,
        updated_at = @now::timestamptz
    FROM started, locked
    WHERE idempotency_keys.id = locked.id
    RETURNING idempotency_keys.id
)
INSERT INTO audit_log (account_id, payment_id, at, actor, action, reason, details)
SELECT @account_id::text, @payment_id::text, @now::timestamptz, @actor::text, 'payment.failover', '', @details::jsonb
FROM keyed
RETURNING audit_log.id;
