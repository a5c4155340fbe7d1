-- +goose Up
-- Payments that wait for the customer (3-D Secure, Pix, Boleto). The
-- provider accepted them: requires_action (the customer must act) and
-- pending (the provider is processing). Both are live for the
-- one-payment-per-order rule.
ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN
    ('processing', 'unknown', 'requires_action', 'pending', 'authorized', 'captured', 'declined', 'failed', 'canceled'));

DROP INDEX payments_one_live_per_order;
CREATE UNIQUE INDEX payments_one_live_per_order ON payments (account_id, order_id)
    WHERE status IN ('processing', 'unknown', 'requires_action', 'pending', 'authorized', 'captured');

-- method_options: what the authorization request carries beyond a card
-- token (return_url, expires_in, billing_details), so a new attempt sends
-- it again. next_action and client_secret: what the customer must do while
-- the payment requires action; action_expires_at: when a Pix or Boleto can
-- no longer be paid.
ALTER TABLE payments
    ADD COLUMN method_options    jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN next_action       jsonb,
    ADD COLUMN client_secret     text,
    ADD COLUMN action_expires_at timestamptz;

-- An authorization the provider accepted that waits for the customer or
-- the provider: its outcome is still to come, its client key has its answer.
ALTER TABLE attempts DROP CONSTRAINT attempts_status_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_status_check CHECK (status IN
    ('processing', 'unknown', 'waiting', 'succeeded', 'declined', 'failed'));

CREATE INDEX attempts_waiting ON attempts (next_reconcile_at) WHERE status = 'waiting';

-- +goose Down
DROP INDEX attempts_waiting;
ALTER TABLE attempts DROP CONSTRAINT attempts_status_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_status_check CHECK (status IN
    ('processing', 'unknown', 'succeeded', 'declined', 'failed'));
ALTER TABLE payments
    DROP COLUMN action_expires_at,
    DROP COLUMN client_secret,
    DROP COLUMN next_action,
    DROP COLUMN method_options;
DROP INDEX payments_one_live_per_order;
CREATE UNIQUE INDEX payments_one_live_per_order ON payments (account_id, order_id)
    WHERE status IN ('processing', 'unknown', 'authorized', 'captured');
ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN
    ('processing', 'unknown', 'authorized', 'captured', 'declined', 'failed', 'canceled'));
