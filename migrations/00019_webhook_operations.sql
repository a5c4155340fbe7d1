-- +goose Up
-- The disabled-endpoints gauge reads these at every metrics refresh; few
-- endpoints are disabled, so the count stays off the whole table.
CREATE INDEX webhook_endpoints_disabled ON webhook_endpoints (failing_since)
    WHERE status = 'disabled' AND deleted_at IS NULL;

-- Admin actions on webhook deliveries, with who acted and why. audit_log
-- is a payment's trail; an event may have no payment
-- (webhook_endpoint.disabled).
CREATE TABLE webhook_audit_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts (id),
    event_id   text NOT NULL REFERENCES events (id),
    at         timestamptz NOT NULL,
    actor      text NOT NULL,
    action     text NOT NULL,
    reason     text NOT NULL,
    details    jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX webhook_audit_log_event ON webhook_audit_log (event_id, id);

-- +goose Down
DROP TABLE webhook_audit_log;
DROP INDEX webhook_endpoints_disabled;
