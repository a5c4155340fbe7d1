-- name: AuditInsert :exec
INSERT INTO audit_log (account_id, payment_id, at, actor, action, reason, details)
VALUES (@account_id, @payment_id, @at, @actor, @action, @reason, @details);

-- name: AuditListByPayment :many
SELECT * FROM audit_log WHERE payment_id = @payment_id ORDER BY id;

-- The account's counter row stays locked until commit, so the next
-- writer's number comes after this one commits: gapless, in commit order.
-- name: EventInsert :exec
WITH next AS (
    INSERT INTO account_event_seqs (account_id, seq) VALUES (@account_id, 1)
    ON CONFLICT (account_id) DO UPDATE SET seq = account_event_seqs.seq + 1
    RETURNING seq
)
INSERT INTO events (id, account_id, payment_id, type, payload, created_at, seq)
SELECT @id, @account_id, @payment_id, @type, @payload, @created_at, next.seq FROM next;

-- name: EventListAfter :many
SELECT * FROM events
WHERE account_id = @account_id AND seq > @after_seq
ORDER BY seq
LIMIT @max_rows;

-- name: WebhookDeliveryInsert :one
INSERT INTO webhook_deliveries (account_id, event_id, type, outcome, payment_id, received_at)
VALUES (@account_id, @event_id, @type, @outcome, @payment_id, @received_at)
ON CONFLICT (account_id, event_id) DO NOTHING
RETURNING account_id;

-- name: AccountEventsRead :exec
UPDATE accounts SET events_read_seq = @seq
WHERE id = @id AND events_read_seq < @seq;

-- name: EventBacklog :one
SELECT COALESCE(SUM(s.seq - a.events_read_seq), 0)::bigint AS unread,
       COALESCE(EXTRACT(EPOCH FROM (sqlc.arg(now)::timestamptz - MIN(e.created_at))), 0)::float8 AS oldest_age_seconds
FROM account_event_seqs s
JOIN accounts a ON a.id = s.account_id
LEFT JOIN events e ON e.account_id = a.id AND e.seq = a.events_read_seq + 1
WHERE s.seq > a.events_read_seq;
