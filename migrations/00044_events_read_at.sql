-- +goose Up
-- When an account's consumer last moved its feed cursor forward: the
-- events backlog gauge counts only accounts whose consumer did so in the
-- last 7 days, so merchants who never poll the feed raise no alert.
-- Expand only: the previous release neither reads nor writes it.
SET LOCAL lock_timeout = '5s';
ALTER TABLE accounts ADD COLUMN events_read_at timestamptz;
-- Consumers that have read the feed before count from now.
UPDATE accounts SET events_read_at = now() WHERE events_read_xid <> '0';

-- +goose Down
ALTER TABLE accounts DROP COLUMN events_read_at;
