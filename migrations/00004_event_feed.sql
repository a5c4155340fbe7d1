-- +goose Up
-- Events are numbered per account under the account row's lock, taken at the
-- end of the writing transaction: numbers follow commit order with no gaps,
-- so a consumer reading after its cursor never misses an event committed
-- late, as it could with a sequence allocated early.
ALTER TABLE accounts ADD COLUMN event_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN seq bigint NOT NULL;
ALTER TABLE events ADD CONSTRAINT events_account_seq UNIQUE (account_id, seq);
DROP INDEX events_account;
-- json, not jsonb: the feed serves each event's snapshot exactly as written.
ALTER TABLE events ALTER COLUMN payload TYPE json;

CREATE TABLE webhook_deliveries (
    account_id  text NOT NULL REFERENCES accounts (id),
    event_id    text NOT NULL,
    type        text NOT NULL,
    -- applied, ignored (stale or not a valid transition) or unknown_object.
    outcome     text NOT NULL,
    payment_id  text,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (account_id, event_id)
);

CREATE INDEX payments_provider_id ON payments (account_id, provider_payment_id) WHERE provider_payment_id IS NOT NULL;

-- +goose Down
DROP INDEX payments_provider_id;
DROP TABLE webhook_deliveries;
CREATE INDEX events_account ON events (account_id, created_at, id);
ALTER TABLE events ALTER COLUMN payload TYPE jsonb;
ALTER TABLE events DROP CONSTRAINT events_account_seq;
ALTER TABLE events DROP COLUMN seq;
ALTER TABLE accounts DROP COLUMN event_seq;
