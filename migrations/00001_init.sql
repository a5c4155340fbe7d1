-- +goose Up
CREATE TABLE accounts (
    id                 text PRIMARY KEY,
    name               text NOT NULL,
    -- SHA-256 of the API key; the key itself is shown once and never stored.
    api_key_hash       bytea NOT NULL UNIQUE,
    -- AES-GCM under ENCRYPTION_KEY.
    stripe_secret_enc  bytea NOT NULL,
    -- HMAC of the secret: two accounts can never share provider credentials,
    -- so their provider keys can never collide at the provider.
    stripe_secret_hmac bytea NOT NULL UNIQUE,
    webhook_secret_enc bytea,
    created_at         timestamptz NOT NULL
);

CREATE TABLE payments (
    id                  text PRIMARY KEY,
    account_id          text NOT NULL REFERENCES accounts (id),
    order_id            text NOT NULL,
    -- Authorization attempt number for this order; payments of one order
    -- are numbered 1, 2, … as each new intent follows a final failure.
    attempt             integer NOT NULL,
    amount              bigint NOT NULL CHECK (amount > 0),
    currency            text NOT NULL,
    capture_method      text NOT NULL CHECK (capture_method IN ('automatic', 'manual')),
    -- A provider token (pm_…), never card data: it is re-sent unchanged on
    -- recovery of the same attempt.
    payment_method      text NOT NULL,
    customer_id         text NOT NULL DEFAULT '',
    description         text NOT NULL DEFAULT '',
    metadata            jsonb NOT NULL DEFAULT '{}',
    status              text NOT NULL CHECK (status IN ('processing', 'unknown', 'authorized', 'captured', 'declined', 'failed', 'canceled')),
    provider            text NOT NULL DEFAULT 'stripe',
    provider_payment_id text,
    amount_captured     bigint NOT NULL DEFAULT 0,
    amount_refunded     bigint NOT NULL DEFAULT 0,
    failure_code        text,
    failure_message     text,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    UNIQUE (account_id, order_id, attempt)
);

-- One live payment per order: a buggy client minting a new key per retry
-- cannot start a second charge while the first may still succeed.
CREATE UNIQUE INDEX payments_one_live_per_order ON payments (account_id, order_id)
    WHERE status IN ('processing', 'unknown', 'authorized', 'captured');

CREATE INDEX payments_status_updated ON payments (status, updated_at)
    WHERE status IN ('processing', 'unknown');

CREATE TABLE attempts (
    id                 text PRIMARY KEY,
    account_id         text NOT NULL REFERENCES accounts (id),
    payment_id         text NOT NULL REFERENCES payments (id),
    order_id           text NOT NULL,
    operation          text NOT NULL CHECK (operation IN ('autorizar', 'capturar', 'cancelar', 'estornar')),
    number             integer NOT NULL,
    -- Derived, never random: {order_id}:{operation}-v{number}.
    provider_key       text NOT NULL,
    status             text NOT NULL CHECK (status IN ('processing', 'unknown', 'succeeded', 'declined', 'failed')),
    -- The exact provider request, so every retry re-sends it unchanged.
    request            jsonb NOT NULL,
    provider_object_id text,
    -- While set and in the future, a live request owns the provider call.
    lease_expires_at   timestamptz,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    UNIQUE (account_id, order_id, operation, number)
);

CREATE INDEX attempts_payment ON attempts (payment_id, created_at);
CREATE INDEX attempts_unresolved ON attempts (updated_at) WHERE status IN ('processing', 'unknown');

CREATE TABLE idempotency_keys (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id       text NOT NULL REFERENCES accounts (id),
    operation        text NOT NULL,
    -- SHA-256 of the client's key; the key itself is never stored.
    key_hash         bytea NOT NULL,
    fingerprint      bytea NOT NULL,
    state            text NOT NULL CHECK (state IN ('in_progress', 'unknown', 'completed')),
    lease_expires_at timestamptz,
    response_status  integer,
    response_body    bytea,
    -- Deferred: the key is reserved first in the transaction that then
    -- writes the payment and its attempt.
    payment_id       text REFERENCES payments (id) DEFERRABLE INITIALLY DEFERRED,
    attempt_id       text REFERENCES attempts (id) DEFERRABLE INITIALLY DEFERRED,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    completed_at     timestamptz,
    -- Set when the stored response was purged; the row lives on as a
    -- tombstone so a late retry can never charge again.
    purged_at        timestamptz,
    UNIQUE (account_id, operation, key_hash)
);

CREATE INDEX idempotency_keys_completed ON idempotency_keys (completed_at) WHERE purged_at IS NULL AND completed_at IS NOT NULL;
CREATE INDEX idempotency_keys_purged ON idempotency_keys (purged_at) WHERE purged_at IS NOT NULL;

CREATE TABLE audit_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts (id),
    payment_id text NOT NULL REFERENCES payments (id),
    at         timestamptz NOT NULL,
    actor      text NOT NULL,
    action     text NOT NULL,
    reason     text NOT NULL DEFAULT '',
    details    jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX audit_log_payment ON audit_log (payment_id, id);

CREATE TABLE events (
    id         text PRIMARY KEY,
    account_id text NOT NULL REFERENCES accounts (id),
    payment_id text NOT NULL REFERENCES payments (id),
    type       text NOT NULL,
    payload    jsonb NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE INDEX events_account ON events (account_id, created_at, id);

-- +goose Down
DROP TABLE events;
DROP TABLE audit_log;
DROP TABLE idempotency_keys;
DROP TABLE attempts;
DROP TABLE payments;
DROP TABLE accounts;
