-- +goose Up
-- Why a capture, cancel or refund attempt failed, so its answer (409
-- provider_rejected with the provider's code) can be rendered again by
-- whoever resolves it: the request, the reconciler or a webhook.
ALTER TABLE attempts
    ADD COLUMN failure_code    text,
    ADD COLUMN failure_message text;

-- The refunded total the provider last reported (charge.refunded). The
-- payment shows the larger of it and the sum of its own succeeded refunds,
-- so a refund made in the provider's dashboard is never hidden.
ALTER TABLE payments
    ADD COLUMN provider_amount_refunded bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE payments DROP COLUMN provider_amount_refunded;
ALTER TABLE attempts DROP COLUMN failure_message, DROP COLUMN failure_code;
