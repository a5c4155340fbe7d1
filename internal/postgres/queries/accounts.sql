-- name: AccountInsert :one
INSERT INTO accounts (id, name, api_key_hash, stripe_secret_enc, stripe_secret_hmac, webhook_secret_enc, created_at)
VALUES (@id, @name, @api_key_hash, @stripe_secret_enc, @stripe_secret_hmac, @webhook_secret_enc, @created_at)
RETURNING *;

-- name: AccountGetByAPIKeyHash :one
-- The current key, or the previous one of a rotation; the caller checks
-- the previous key's expiry against its own clock.
SELECT * FROM accounts WHERE api_key_hash = @api_key_hash OR previous_api_key_hash = @api_key_hash;

-- name: AccountGetByID :one
SELECT * FROM accounts WHERE id = @id;

-- name: AccountList :many
SELECT * FROM accounts ORDER BY created_at, id;

-- name: AccountRotateAPIKey :one
-- The current key becomes the previous one, valid until
-- @previous_expires_at; an earlier previous key stops at once.
UPDATE accounts
SET previous_api_key_hash       = api_key_hash,
    previous_api_key_expires_at = @previous_expires_at,
    api_key_hash                = @api_key_hash,
    api_key_rotated_at          = @rotated_at
WHERE id = @id
RETURNING *;
