-- +goose Up
CREATE TABLE refunds (
    id                 text PRIMARY KEY,
    account_id         text NOT NULL REFERENCES accounts (id),
    payment_id         text NOT NULL REFERENCES payments (id),
    attempt_id         text NOT NULL UNIQUE REFERENCES attempts (id),
    amount             bigint NOT NULL CHECK (amount > 0),
    status             text NOT NULL CHECK (status IN ('processing', 'unknown', 'succeeded', 'failed')),
    provider_refund_id text,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL
);

CREATE INDEX refunds_payment ON refunds (payment_id, created_at);

-- The reconciler finds a payment's key record by its attempt.
CREATE INDEX idempotency_keys_attempt ON idempotency_keys (attempt_id);

-- +goose Down
DROP INDEX idempotency_keys_attempt;
DROP TABLE refunds;
