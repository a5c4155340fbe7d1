-- name: AccountInsert :one
INSERT INTO accounts (id, name, api_key_hash, stripe_secret_enc, stripe_secret_hmac, webhook_secret_enc, created_at)
VALUES (@id, @name, @api_key_hash, @stripe_secret_enc, @stripe_secret_hmac, @webhook_secret_enc, @created_at)
RETURNING *;

-- name: AccountGetByAPIKeyHash :one
SELECT * FROM accounts WHERE api_key_hash = @api_key_hash;

-- name: AccountGetByID :one
SELECT * FROM accounts WHERE id = @id;
