-- Reads of the operations console, and its sessions. None of the reads
-- locks anything.

-- Payments that wait (for the provider or the customer), by how long they
-- have been in their status.
-- name: PaymentCountWaitingByAge :many
SELECT status,
       (CASE WHEN waited < interval '5 minutes' THEN 'under_5m'
             WHEN waited < interval '1 hour' THEN '5m_to_1h'
             WHEN waited < interval '24 hours' THEN '1h_to_24h'
             ELSE 'over_24h' END)::text AS age,
       count(*)::bigint AS n
FROM (SELECT status, sqlc.arg(now)::timestamptz - updated_at AS waited FROM payments
      WHERE status IN ('unknown', 'processing', 'requires_action', 'pending')) w
GROUP BY 1, 2;

-- Read through events_payment (payment_id, seq), in feed order.
-- name: EventListByPayment :many
SELECT id, type, created_at FROM events
WHERE account_id = @account_id AND payment_id = @payment_id
ORDER BY seq
LIMIT @max_rows;

-- name: ProviderEventReceiptListByPayment :many
SELECT event_id, type, outcome, received_at FROM webhook_deliveries
WHERE account_id = @account_id AND payment_id = @payment_id
ORDER BY received_at, event_id
LIMIT @max_rows;

-- Open discrepancies by kind, for the overview.
-- name: DiscrepancyCountOpenByKind :many
SELECT kind, count(*)::bigint AS n FROM discrepancies
WHERE status = 'open'
GROUP BY kind
ORDER BY kind;

-- name: ConsoleSessionCreate :exec
INSERT INTO console_sessions (id_hash, actor, created_at, expires_at)
VALUES (@id_hash, @actor, @created_at, @expires_at);

-- name: ConsoleSessionPurge :exec
DELETE FROM console_sessions WHERE expires_at <= @now;

-- name: ConsoleSessionGet :one
SELECT actor, expires_at FROM console_sessions
WHERE id_hash = @id_hash AND expires_at > @now;

-- name: ConsoleSessionDelete :exec
DELETE FROM console_sessions WHERE id_hash = @id_hash;

-- Marks a sign-in form used; no row means it already was.
-- name: ConsoleSignInFormUse :execrows
INSERT INTO console_sign_in_forms (nonce_hash, expires_at)
VALUES (@nonce_hash, @expires_at)
ON CONFLICT DO NOTHING;

-- name: ConsoleSignInFormPurge :exec
DELETE FROM console_sign_in_forms WHERE expires_at <= @before;

-- name: ConsoleOperatorCreate :exec
INSERT INTO console_operators (id, name, token_hash, created_at)
VALUES (@id, @name, @token_hash, @now);

-- name: ConsoleOperatorByTokenHash :one
SELECT name FROM console_operators WHERE token_hash = @token_hash AND disabled_at IS NULL;

-- name: ConsoleOperatorList :many
SELECT id, name, created_at, disabled_at FROM console_operators ORDER BY lower(name);

-- Disabling also ends the operator's sessions: a session names its actor.
-- name: ConsoleOperatorDisable :one
WITH op AS (
    UPDATE console_operators SET disabled_at = @now
    WHERE lower(name) = lower(@name) AND disabled_at IS NULL
    RETURNING name
), ended AS (
    DELETE FROM console_sessions s USING op WHERE s.actor = op.name
)
SELECT count(*)::bigint AS n FROM op;

-- name: ConsoleOperatorNameTaken :one
SELECT EXISTS (SELECT 1 FROM console_operators WHERE lower(name) = lower(@name))::bool AS taken;

-- Payments of any account whose order id or provider id is @q, newest
-- first. Walking the accounts lets each probe use the per-account indexes
-- (the order's unique key, payments_provider_id): no index just for this.
-- name: ConsolePaymentSearch :many
SELECT p.id, p.account_id, p.order_id, p.status, p.amount, p.currency, p.provider, p.created_at
FROM accounts a
CROSS JOIN LATERAL (
    SELECT o.id, o.account_id, o.order_id, o.status, o.amount, o.currency, o.provider, o.created_at
    FROM payments o WHERE o.account_id = a.id AND o.order_id = @q
    UNION ALL
    SELECT x.id, x.account_id, x.order_id, x.status, x.amount, x.currency, x.provider, x.created_at
    FROM payments x WHERE x.account_id = a.id AND x.provider_payment_id = @q AND x.order_id <> @q
) p
ORDER BY p.created_at DESC, p.id
LIMIT @max_rows;

-- Payments created since @since by provider and hour. Payment ids are
-- UUIDv7, ordered by time: @from_id bounds the primary key's range.
-- name: ConsolePaymentsByHour :many
SELECT provider, date_trunc('hour', created_at)::timestamptz AS hour, count(*)::bigint AS n
FROM payments
WHERE id >= @from_id AND id < 'pay`' AND created_at >= @since
GROUP BY 1, 2
ORDER BY 1, 2;

-- Authorization attempts since @since by provider and hour, with their
-- outcomes so far. Attempt ids are UUIDv7, as payments'.
-- name: ConsoleAuthorizeOutcomesByHour :many
SELECT provider, date_trunc('hour', created_at)::timestamptz AS hour,
       count(*)::bigint AS total,
       count(*) FILTER (WHERE status = 'succeeded')::bigint AS succeeded,
       count(*) FILTER (WHERE status = 'declined')::bigint AS declined,
       count(*) FILTER (WHERE status = 'unknown')::bigint AS unknown
FROM attempts
WHERE id >= @from_id AND id < 'att`' AND operation = 'autorizar' AND created_at >= @since
GROUP BY 1, 2
ORDER BY 1, 2;

-- Payments whose audit trail names the request id @q among the newest
-- @rows_back audit rows: a request id is looked for soon after the request,
-- and a bounded walk down the primary key needs no index of its own (one
-- more on every audit row written would tax every payment).
-- name: ConsolePaymentIDsByRequestID :many
SELECT DISTINCT payment_id::text AS payment_id FROM audit_log
WHERE id > (SELECT coalesce(max(id), 0) FROM audit_log) - @rows_back::bigint
  AND details->>'request_id' = @q::text
LIMIT 50;
