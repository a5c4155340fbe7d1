-- +goose Up
-- The provider account a registered secret key belongs to, as the provider
-- answers it (GET /v1/account). A secret key and a restricted key of one
-- Stripe account differ, so their fingerprints cannot tell they are one
-- account's; this can. NULL for accounts registered before it was asked.
ALTER TABLE accounts ADD COLUMN stripe_account_id text;

-- +goose Down
ALTER TABLE accounts DROP COLUMN stripe_account_id;
