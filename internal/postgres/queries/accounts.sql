-- name: AccountInsert :one
INSERT INTO accounts (id, name, api_key_hash, stripe_secret_enc, stripe_secret_hmac, webhook_secret_enc, created_at, stripe_account_id,
                      mercadopago_access_token_enc, mercadopago_access_token_hmac, mercadopago_webhook_secret_enc, providers)
VALUES (@id, @name, @api_key_hash, @stripe_secret_enc, @stripe_secret_hmac, @webhook_secret_enc, @created_at, sqlc.narg('stripe_account_id'),
        @mercadopago_access_token_enc, @mercadopago_access_token_hmac, @mercadopago_webhook_secret_enc, @providers)
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

-- name: AccountGetByIDForUpdate :one
SELECT * FROM accounts WHERE id = @id FOR UPDATE;

-- name: AccountGetFirst :one
SELECT * FROM accounts ORDER BY id LIMIT 1;

-- name: AccountListIDsAfter :many
SELECT id FROM accounts WHERE id > @after ORDER BY id LIMIT @max_rows;

-- name: AccountIDBySecretHMAC :many
SELECT id FROM accounts WHERE stripe_secret_hmac = @stripe_secret_hmac;

-- name: AccountUpdateSecrets :exec
UPDATE accounts
SET stripe_secret_enc = @stripe_secret_enc, stripe_secret_hmac = @stripe_secret_hmac, webhook_secret_enc = @webhook_secret_enc,
    mercadopago_access_token_enc = @mercadopago_access_token_enc, mercadopago_access_token_hmac = @mercadopago_access_token_hmac,
    mercadopago_webhook_secret_enc = @mercadopago_webhook_secret_enc
WHERE id = @id;

-- name: AccountUpdateProviders :one
-- Every provider column at once, under the row lock the caller holds.
UPDATE accounts
SET stripe_secret_enc = @stripe_secret_enc, stripe_secret_hmac = @stripe_secret_hmac, webhook_secret_enc = @webhook_secret_enc,
    stripe_account_id = sqlc.narg('stripe_account_id'),
    mercadopago_access_token_enc = @mercadopago_access_token_enc, mercadopago_access_token_hmac = @mercadopago_access_token_hmac,
    mercadopago_webhook_secret_enc = @mercadopago_webhook_secret_enc, providers = @providers
WHERE id = @id
RETURNING *;

-- name: AccountIDByMercadoPagoHMAC :many
SELECT id FROM accounts WHERE mercadopago_access_token_hmac = @mercadopago_access_token_hmac;

-- name: EncryptionCanaryGet :one
SELECT ciphertext FROM encryption_canary WHERE id;

-- name: EncryptionCanaryGetForUpdate :one
SELECT ciphertext FROM encryption_canary WHERE id FOR UPDATE;

-- name: EncryptionCanaryInsert :exec
INSERT INTO encryption_canary (ciphertext, updated_at) VALUES (@ciphertext, @updated_at)
ON CONFLICT (id) DO NOTHING;

-- name: EncryptionCanaryUpdate :exec
UPDATE encryption_canary SET ciphertext = @ciphertext, updated_at = @updated_at WHERE id;

-- name: AccountSetStripeAccountID :execrows
UPDATE accounts SET stripe_account_id = @stripe_account_id
WHERE id = @id AND stripe_account_id IS NULL;

-- name: AccountUpdateRouting :one
-- Under the row lock the caller holds, so that the routing is checked
-- against the providers it is stored beside.
UPDATE accounts SET routing = @routing WHERE id = @id
RETURNING *;
