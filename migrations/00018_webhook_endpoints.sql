-- +goose Up
-- Webhooks to the merchant (CONTRACT §13). The delivery jobs themselves live
-- in River's tables (its own migrations, run after these by the migrate
-- step); these tables hold what the API shows: endpoints and attempts.

-- Every change of a payment bumps version, so a consumer can drop a stale
-- delivery. Existing rows start at 1.
ALTER TABLE payments ADD COLUMN version bigint NOT NULL DEFAULT 1;

-- webhook_endpoint.disabled is an event of an endpoint, not of a payment.
ALTER TABLE events ALTER COLUMN payment_id DROP NOT NULL;

CREATE TABLE webhook_endpoints (
    id                  text PRIMARY KEY,
    account_id          text NOT NULL REFERENCES accounts (id),
    url                 text NOT NULL,
    -- Event types, or the single entry '*' for all.
    enabled_events      text[] NOT NULL,
    description         text NOT NULL DEFAULT '',
    status              text NOT NULL CHECK (status IN ('enabled', 'disabled')),
    -- Signing secrets, sealed with ENCRYPTION_KEY like provider secrets.
    secret_enc          bytea NOT NULL,
    -- The secret before the last rotation, still signing until
    -- previous_expires_at.
    previous_secret_enc bytea,
    previous_expires_at timestamptz,
    -- The client key that created the endpoint, and the request's
    -- fingerprint: a retry replays the creation, another body is refused.
    create_key_hash     bytea NOT NULL,
    create_fingerprint  bytea NOT NULL,
    -- The client key of the last rotation, so a retried rotation replays.
    rotate_key_hash     bytea,
    -- Since when every delivery has failed (null: the last one succeeded).
    failing_since       timestamptz,
    deleted_at          timestamptz,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    UNIQUE (account_id, create_key_hash)
);
CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, id) WHERE deleted_at IS NULL;

-- One row per HTTP attempt of a delivery (an event to an endpoint).
CREATE TABLE webhook_attempts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id   text NOT NULL REFERENCES accounts (id),
    endpoint_id  text NOT NULL REFERENCES webhook_endpoints (id),
    event_id     text NOT NULL,
    at           timestamptz NOT NULL,
    -- 0 when no HTTP answer came (refused address, timeout, connection).
    status_code  integer NOT NULL,
    duration_ms  bigint NOT NULL,
    -- succeeded; retrying (failed, another attempt follows); failed (the
    -- last attempt of the delivery failed).
    outcome      text NOT NULL CHECK (outcome IN ('succeeded', 'retrying', 'failed')),
    -- The first 1 KiB of the answer's body, or why there was none.
    response     text NOT NULL DEFAULT ''
);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, id);
CREATE INDEX webhook_attempts_event ON webhook_attempts (event_id, id);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_endpoints;
DELETE FROM events WHERE payment_id IS NULL;
ALTER TABLE events ALTER COLUMN payment_id SET NOT NULL;
ALTER TABLE payments DROP COLUMN version;
