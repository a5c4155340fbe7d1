-- +goose Up
-- The disabled-endpoints gauge reads these at every metrics refresh; few
-- endpoints are disabled, so the count stays off the whole table.
CREATE INDEX webhook_endpoints_disabled ON webhook_endpoints (failing_since)
    WHERE status = 'disabled' AND deleted_at IS NULL;

-- +goose Down
DROP INDEX webhook_endpoints_disabled;
