-- +goose Up
-- An account may hold credentials for several providers: Mercado Pago's
-- beside Stripe's, each sealed under ENCRYPTION_KEY like the Stripe
-- secret. An account may now have no Stripe secret at all.
ALTER TABLE accounts
    ALTER COLUMN stripe_secret_enc DROP NOT NULL,
    ALTER COLUMN stripe_secret_hmac DROP NOT NULL,
    ADD COLUMN mercadopago_access_token_enc bytea,
    -- HMAC of the access token: no two accounts share it (unique index in
    -- the next migration), as stripe_secret_hmac for Stripe's.
    ADD COLUMN mercadopago_access_token_hmac bytea,
    ADD COLUMN mercadopago_webhook_secret_enc bytea,
    -- The providers the account has credentials for, in the order they
    -- were added. Empty for accounts created before: Stripe alone.
    ADD COLUMN providers text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE accounts
    DROP COLUMN providers,
    DROP COLUMN mercadopago_webhook_secret_enc,
    DROP COLUMN mercadopago_access_token_hmac,
    DROP COLUMN mercadopago_access_token_enc;
