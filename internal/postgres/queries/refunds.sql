-- name: RefundInsert :one
INSERT INTO refunds (id, account_id, payment_id, attempt_id, amount, status, created_at, updated_at)
VALUES (@id, @account_id, @payment_id, @attempt_id, @amount, 'processing', @now, @now)
RETURNING *;

-- name: RefundGetByAttempt :one
SELECT * FROM refunds WHERE attempt_id = @attempt_id;

-- Refunds whose outcome is not known yet still hold their amount: an
-- over-refund is refused against captured − refunded − pending.
-- name: RefundSumPending :one
SELECT COALESCE(SUM(amount), 0)::bigint AS pending
FROM refunds
WHERE payment_id = @payment_id AND status IN ('processing', 'unknown');

-- name: RefundUpdateOutcome :one
UPDATE refunds
SET status = @status, provider_refund_id = COALESCE(@provider_refund_id, provider_refund_id), updated_at = @now
WHERE id = @id
RETURNING *;

-- name: RefundSumSucceeded :one
SELECT COALESCE(SUM(amount), 0)::bigint AS succeeded
FROM refunds
WHERE payment_id = @payment_id AND status = 'succeeded';

-- A payment's refunds, to tell which of the provider's refunds another
-- refund already claims (a provider that keeps no refund metadata).
-- name: RefundListByPayment :many
SELECT * FROM refunds WHERE payment_id = @payment_id ORDER BY created_at, id;

-- One refund of an account: another account's is not found.
-- name: RefundGetByID :one
SELECT * FROM refunds WHERE account_id = @account_id AND id = @id;

-- A page of a payment's refunds, oldest first, after the position
-- (created_at, id) of the previous page's last refund; refunds_payment
-- serves it.
-- name: RefundListByPaymentAfter :many
SELECT * FROM refunds
WHERE account_id = @account_id AND payment_id = @payment_id
  AND (created_at, id) > (@after_created_at::timestamptz, @after_id::text)
ORDER BY created_at, id
LIMIT @max_rows;
