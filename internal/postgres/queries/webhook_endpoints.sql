-- A retry of the same creation finds the existing row (no insert).
-- name: WebhookEndpointInsert :one
INSERT INTO webhook_endpoints (id, account_id, url, enabled_events, description, status, secret_enc,
                               create_key_hash, create_fingerprint, created_at, updated_at)
VALUES (@id, @account_id, @url, @enabled_events, @description, 'enabled', @secret_enc,
        @create_key_hash, @create_fingerprint, @now, @now)
ON CONFLICT (account_id, create_key_hash) DO NOTHING
RETURNING *;

-- Serializes an account's endpoint creations, so each counts the ones
-- before it. NO KEY UPDATE leaves foreign key checks (KEY SHARE) of the
-- account's payments unblocked.
-- name: AccountLockForEndpoints :one
SELECT id FROM accounts WHERE id = @id FOR NO KEY UPDATE;

-- name: WebhookEndpointCount :one
SELECT count(*) FROM webhook_endpoints WHERE account_id = @account_id AND deleted_at IS NULL;

-- name: WebhookEndpointByCreateKey :one
SELECT * FROM webhook_endpoints WHERE account_id = @account_id AND create_key_hash = @create_key_hash;

-- name: WebhookEndpointGet :one
SELECT * FROM webhook_endpoints WHERE account_id = @account_id AND id = @id AND deleted_at IS NULL;

-- name: WebhookEndpointGetAny :one
SELECT * FROM webhook_endpoints WHERE id = @id;

-- name: WebhookEndpointList :many
SELECT * FROM webhook_endpoints
WHERE account_id = @account_id AND deleted_at IS NULL AND id > @after_id::text
ORDER BY id
LIMIT @max_rows;

-- name: WebhookEndpointUpdate :one
UPDATE webhook_endpoints
SET url = @url, enabled_events = @enabled_events, description = @description, status = @status,
    failing_since = CASE WHEN @status::text = 'enabled' AND status = 'disabled' THEN NULL ELSE failing_since END,
    updated_at = @now
WHERE account_id = @account_id AND id = @id AND deleted_at IS NULL
RETURNING *;

-- name: WebhookEndpointDelete :one
UPDATE webhook_endpoints SET deleted_at = @now, status = 'disabled', updated_at = @now
WHERE account_id = @account_id AND id = @id AND deleted_at IS NULL
RETURNING *;

-- name: WebhookEndpointRotate :one
UPDATE webhook_endpoints
SET previous_secret_enc = secret_enc, previous_expires_at = @previous_expires_at,
    secret_enc = @secret_enc, rotate_key_hash = @rotate_key_hash, updated_at = @now
WHERE account_id = @account_id AND id = @id AND deleted_at IS NULL
RETURNING *;

-- The enabled endpoints of an account that take an event type; run in the
-- event's own transaction.
-- name: WebhookEndpointsMatching :many
SELECT id FROM webhook_endpoints
WHERE account_id = @account_id AND status = 'enabled' AND deleted_at IS NULL
  AND (enabled_events @> ARRAY[@type::text] OR enabled_events @> ARRAY['*'])
ORDER BY id;

-- The account's enabled endpoints with the events each takes, read ahead
-- by a payment transaction; WebhookEndpointsMatching filtered in Go.
-- name: WebhookEndpointsEnabled :many
SELECT id, enabled_events FROM webhook_endpoints
WHERE account_id = @account_id AND status = 'enabled' AND deleted_at IS NULL
ORDER BY id;

-- Success clears the failing streak; a failure starts one if none runs.
-- name: WebhookEndpointDelivered :exec
UPDATE webhook_endpoints SET failing_since = NULL WHERE id = @id AND failing_since IS NOT NULL;

-- name: WebhookEndpointFailed :one
UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, @now)
WHERE id = @id
RETURNING failing_since;

-- name: WebhookEndpointDisable :one
UPDATE webhook_endpoints SET status = 'disabled', updated_at = @now
WHERE id = @id AND status = 'enabled'
RETURNING *;

-- name: WebhookAttemptInsert :exec
INSERT INTO webhook_attempts (account_id, endpoint_id, event_id, at, status_code, duration_ms, outcome, response)
VALUES (@account_id, @endpoint_id, @event_id, @at, @status_code, @duration_ms, @outcome, @response);

-- name: WebhookAttemptsByEndpoint :many
SELECT * FROM webhook_attempts
WHERE account_id = @account_id AND endpoint_id = @endpoint_id AND id > @after_id::bigint
ORDER BY id
LIMIT @max_rows;

-- name: WebhookAttemptsByEvent :many
SELECT * FROM webhook_attempts
WHERE account_id = @account_id AND event_id = @event_id AND id > @after_id::bigint
ORDER BY id
LIMIT @max_rows;

-- The event as the feed serves it, with its position.
-- name: EventGetForDelivery :one
SELECT xid::text AS xid_text, seq, type, payload, payment_id FROM events WHERE account_id = @account_id AND id = @id;

-- For the disabled-endpoints gauge: failing_since is still set on an
-- endpoint the service disabled after its failing streak.
-- name: WebhookEndpointsDisabledCount :many
SELECT (failing_since IS NOT NULL)::bool AS failing, count(*) AS n
FROM webhook_endpoints
WHERE status = 'disabled' AND deleted_at IS NULL
GROUP BY 1;

-- Every account's endpoints, for the admin list.
-- name: WebhookEndpointListAll :many
SELECT * FROM webhook_endpoints
WHERE deleted_at IS NULL AND id > @after_id::text
ORDER BY id
LIMIT @max_rows;

-- name: EventAccount :one
SELECT account_id FROM events WHERE id = @id;

-- name: WebhookAuditInsert :exec
INSERT INTO webhook_audit_log (account_id, event_id, at, actor, action, reason, details)
VALUES (@account_id, @event_id, @at, @actor, @action, @reason, @details);

-- Per enabled endpoint, the age of its oldest delivery job not yet done,
-- the endpoints furthest behind first. river_job is River's table
-- (riverschema/ describes it to sqlc).
-- name: WebhookEndpointsPendingAge :many
SELECT e.id, EXTRACT(EPOCH FROM (sqlc.arg(now)::timestamptz - MIN(j.created_at)))::float8 AS age_seconds
FROM river_job j
JOIN webhook_endpoints e ON e.id = j.args->>'endpoint_id'
WHERE j.kind = 'webhook_delivery' AND j.state IN ('pending', 'available', 'scheduled', 'retryable', 'running')
  AND e.status = 'enabled' AND e.deleted_at IS NULL
GROUP BY e.id
ORDER BY 2 DESC, e.id
LIMIT sqlc.arg(max_rows);

-- The account's other live endpoints with this URL, named in a creation's
-- answer (webhook_endpoints_account serves the account's few rows).
-- name: WebhookEndpointIDsByURL :many
SELECT id FROM webhook_endpoints
WHERE account_id = @account_id AND url = @url AND deleted_at IS NULL AND id <> @except_id
ORDER BY id;
