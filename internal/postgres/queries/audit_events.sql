-- name: AuditInsert :exec
INSERT INTO audit_log (account_id, payment_id, at, actor, action, reason, details)
VALUES (@account_id, @payment_id, @at, @actor, @action, @reason, @details);

-- name: AuditListByPayment :many
SELECT * FROM audit_log WHERE payment_id = @payment_id ORDER BY id;

-- xid (the writing transaction) and seq come from their defaults: no row
-- that two writers of one account contend for.
-- name: EventInsert :exec
INSERT INTO events (id, account_id, payment_id, type, payload, created_at)
VALUES (@id, @account_id, @payment_id, @type, @payload, @created_at);

-- Only events of transactions older than the oldest one still running:
-- every transaction below that horizon has ended, and any transaction yet
-- to write gets a larger xid, so nothing can appear before a position
-- served here. pg_current_snapshot() is this statement's snapshot, the one
-- the rows are read with. The position goes out as xid_text (pgx has no
-- xid8 type); ordering names e.xid, the xid8 column, since an output
-- column named xid would be ordered as text ("1010" < "763").
-- name: EventListAfter :many
SELECT e.xid::text AS xid_text, e.seq, e.payload FROM events e
WHERE e.account_id = @account_id
  AND (e.xid, e.seq) > (sqlc.arg(after_xid)::text::xid8, sqlc.arg(after_seq)::bigint)
  AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY e.xid, e.seq
LIMIT @max_rows;

-- name: ProviderEventReceiptInsert :one
INSERT INTO webhook_deliveries (account_id, event_id, type, outcome, payment_id, received_at)
VALUES (@account_id, @event_id, @type, @outcome, @payment_id, @received_at)
ON CONFLICT (account_id, event_id) DO NOTHING
RETURNING account_id;

-- name: AccountFeedCursorAdvance :exec
UPDATE accounts SET events_read_xid = sqlc.arg(xid)::text::xid8, events_read_seq = sqlc.arg(seq)::bigint,
    events_read_at = @read_at
WHERE id = @id AND (events_read_xid, events_read_seq) < (sqlc.arg(xid)::text::xid8, sqlc.arg(seq)::bigint);

-- Counted per account up to a cap, so an account whose consumer stopped
-- costs a bounded scan on each refresh, not its whole history; only
-- accounts whose consumer moved its cursor since active_since: one that
-- never reads the feed has no consumer to fall behind.
-- name: EventBacklog :one
SELECT COALESCE(SUM(u.n), 0)::bigint AS unread,
       COALESCE(EXTRACT(EPOCH FROM (sqlc.arg(now)::timestamptz - MIN(f.created_at))), 0)::float8 AS oldest_age_seconds
FROM accounts a
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM events e
        WHERE e.account_id = a.id AND (e.xid, e.seq) > (a.events_read_xid, a.events_read_seq)
        LIMIT 100000
    ) capped
) u
LEFT JOIN LATERAL (
    SELECT e.created_at FROM events e
    WHERE e.account_id = a.id AND (e.xid, e.seq) > (a.events_read_xid, a.events_read_seq)
    ORDER BY e.xid, e.seq
    LIMIT 1
) f ON true
WHERE a.events_read_at >= @active_since AND u.n > 0;

-- An audit entry and the event of one change, in one statement.
-- name: AuditEventInsert :exec
WITH audit AS (
    INSERT INTO audit_log (account_id, payment_id, at, actor, action, reason, details)
    VALUES (@account_id, @payment_id, @at, @actor, @action, @reason, @details)
)
INSERT INTO events (id, account_id, payment_id, type, payload, created_at)
VALUES (@event_id, @event_account_id, @event_payment_id, @type, @payload, @created_at);
