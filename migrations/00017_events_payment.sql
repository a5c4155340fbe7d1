-- +goose Up
-- A payment's events, in feed order: the console's timeline read them by
-- scanning every event of the payment's account.
CREATE INDEX events_payment ON events (payment_id, seq);

-- +goose Down
DROP INDEX events_payment;
