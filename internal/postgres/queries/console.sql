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
