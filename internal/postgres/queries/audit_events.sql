-- name: AuditInsert :exec
INSERT INTO audit_log (account_id, payment_id, at, actor, action, reason, details)
VALUES (@account_id, @payment_id, @at, @actor, @action, @reason, @details);

-- name: AuditListByPayment :many
SELECT * FROM audit_log WHERE payment_id = @payment_id ORDER BY id;

-- name: EventInsert :exec
INSERT INTO events (id, account_id, payment_id, type, payload, created_at)
VALUES (@id, @account_id, @payment_id, @type, @payload, @created_at);
