-- +goose Up
-- Console sessions live here, so signing out ends one on every instance
-- and its expiry is the server's. The cookie holds a random id; only its
-- SHA-256 is stored, so a copy of this table opens no session.
CREATE TABLE console_sessions (
    id_hash    bytea PRIMARY KEY,
    actor      text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);

-- Sign-in forms already used: a form's token is good for one sign-in. A
-- row is kept until the form would have expired anyway.
CREATE TABLE console_sign_in_forms (
    nonce_hash bytea PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX console_sign_in_forms_expires ON console_sign_in_forms (expires_at);

-- +goose Down
DROP TABLE console_sign_in_forms;
DROP TABLE console_sessions;
