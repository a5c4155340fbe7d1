-- +goose Up
-- A hash of the raw request bytes, beside the fingerprint: a retry with the
-- same bytes is answered without parsing its body again. NULL for keys
-- written before it, and for operations whose request is more than its body;
-- those keep comparing fingerprints.
ALTER TABLE idempotency_keys ADD COLUMN body_hash bytea;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN body_hash;
