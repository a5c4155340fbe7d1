-- +goose Up
-- Named console operators, each with a token of their own, so an action in
-- the audit trail names who did it without trusting a typed name. Tokens
-- are random (256 bits) and only their SHA-256 is stored: a copy of this
-- table signs nobody in. A disabled operator signs in no more.
CREATE TABLE console_operators (
    id          text PRIMARY KEY,
    name        text NOT NULL,
    token_hash  bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL,
    disabled_at timestamptz
);
-- A new, empty table: built at once, no concurrent build needed.
CREATE UNIQUE INDEX console_operators_name ON console_operators (lower(name));

-- +goose Down
DROP TABLE console_operators;
