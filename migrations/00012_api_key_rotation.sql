-- +goose Up
-- API key rotation: the key being replaced stays valid until
-- previous_api_key_expires_at, so clients can switch without an outage.
-- Rotating again replaces it: at most two keys per account at any time.
ALTER TABLE accounts
    ADD COLUMN previous_api_key_hash       bytea UNIQUE,
    ADD COLUMN previous_api_key_expires_at timestamptz,
    ADD COLUMN api_key_rotated_at          timestamptz,
    ADD CONSTRAINT accounts_previous_api_key_expiry
        CHECK ((previous_api_key_hash IS NULL) = (previous_api_key_expires_at IS NULL));

-- +goose Down
ALTER TABLE accounts
    DROP CONSTRAINT accounts_previous_api_key_expiry,
    DROP COLUMN api_key_rotated_at,
    DROP COLUMN previous_api_key_expires_at,
    DROP COLUMN previous_api_key_hash;
