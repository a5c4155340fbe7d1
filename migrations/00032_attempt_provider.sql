-- +goose Up
-- The provider each attempt runs at (payments.provider has been there since
-- the start). Rows from before were all Stripe's; a constant default adds
-- the column without rewriting the table.
ALTER TABLE attempts ADD COLUMN provider text NOT NULL DEFAULT 'stripe';

-- +goose Down
ALTER TABLE attempts DROP COLUMN provider;
