-- +goose Up
-- A stored answer is a kind (created, accepted, ok, refused) and its body;
-- the api maps the kind to an HTTP status. Rows completed before carry only
-- response_status, which the store reads as the kind it stood for; the
-- column stays written while the release before this one, which reads it,
-- may still be running. No default and no check: adding it rewrites and
-- scans nothing.
ALTER TABLE idempotency_keys ADD COLUMN response_kind text;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN response_kind;
