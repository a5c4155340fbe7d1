-- Reads of the operations console. None of them locks anything.

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

-- name: WebhookDeliveryListByPayment :many
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
