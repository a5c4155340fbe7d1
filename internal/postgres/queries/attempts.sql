-- name: AttemptNextNumber :one
SELECT (COALESCE(MAX(number), 0) + 1)::integer AS next
FROM attempts
WHERE account_id = @account_id AND order_id = @order_id AND operation = @operation;

-- name: AttemptInsert :one
INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status,
                      request, lease_expires_at, created_at, updated_at)
VALUES (@id, @account_id, @payment_id, @order_id, @operation, @number, @provider_key, 'processing',
        @request, @lease_expires_at, @now, @now)
RETURNING *;

-- name: AttemptGetByID :one
SELECT * FROM attempts WHERE id = @id;

-- name: AttemptListByPayment :many
SELECT * FROM attempts WHERE payment_id = @payment_id ORDER BY created_at, number;

-- name: AttemptSetLease :exec
UPDATE attempts SET lease_expires_at = @lease_expires_at, updated_at = @now WHERE id = @id;

-- name: AttemptUpdateOutcome :one
UPDATE attempts
SET status = @status, provider_object_id = COALESCE(@provider_object_id, provider_object_id),
    lease_expires_at = NULL, updated_at = @now
WHERE id = @id
RETURNING *;
