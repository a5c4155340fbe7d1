-- +goose Up
-- The account's routing rules (CONTRACT §15) as the admin API stores them;
-- NULL means its providers in the order they were added.
ALTER TABLE accounts ADD COLUMN routing jsonb;

-- +goose Down
ALTER TABLE accounts DROP COLUMN routing;
