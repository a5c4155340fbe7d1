-- +goose Up
-- A known value sealed with ENCRYPTION_KEY. Start-up opens it: a wrong but
-- well-formed key stops the instance with one clear line instead of
-- answering 500 to every call that needs a provider secret. One row.
CREATE TABLE encryption_canary (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    -- AES-GCM under the current ENCRYPTION_KEY (or, during a rotation,
    -- the previous one until `payments accounts reencrypt` has run).
    ciphertext bytea NOT NULL,
    updated_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE encryption_canary;
