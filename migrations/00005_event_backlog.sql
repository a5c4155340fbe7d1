-- +goose Up
-- The highest cursor an account's consumer has passed back: events after it
-- are the backlog downstream has not fetched yet.
ALTER TABLE accounts ADD COLUMN events_read_seq bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE accounts DROP COLUMN events_read_seq;
