-- +goose NO TRANSACTION
-- +goose Up
-- One service account per provider account. Built without blocking writes
-- to accounts; a build cut short leaves an invalid index, dropped first
-- when the migration runs again.
DROP INDEX CONCURRENTLY IF EXISTS accounts_stripe_account_id_key;
CREATE UNIQUE INDEX CONCURRENTLY accounts_stripe_account_id_key
    ON accounts (stripe_account_id) WHERE stripe_account_id IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS accounts_stripe_account_id_key;
