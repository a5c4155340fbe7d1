-- +goose NO TRANSACTION
-- +goose Up
-- One service account per Mercado Pago access token. Built without
-- blocking writes to accounts; a build cut short leaves an invalid index,
-- dropped first when the migration runs again.
DROP INDEX CONCURRENTLY IF EXISTS accounts_mercadopago_access_token_hmac_key;
CREATE UNIQUE INDEX CONCURRENTLY accounts_mercadopago_access_token_hmac_key
    ON accounts (mercadopago_access_token_hmac) WHERE mercadopago_access_token_hmac IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS accounts_mercadopago_access_token_hmac_key;
