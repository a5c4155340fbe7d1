-- +goose Up
-- A payment the provider has no object for is a discrepancy too. The wider
-- check is added unvalidated, then validated without blocking writes.
ALTER TABLE discrepancies DROP CONSTRAINT discrepancies_kind_check;
ALTER TABLE discrepancies ADD CONSTRAINT discrepancies_kind_check
    CHECK (kind IN ('status_mismatch', 'paid_at_provider_not_here', 'amount_captured_mismatch',
                    'amount_refunded_mismatch', 'disputed', 'missing_at_provider')) NOT VALID;
ALTER TABLE discrepancies VALIDATE CONSTRAINT discrepancies_kind_check;

-- A resolution holds its discrepancy from before its first provider call
-- until it is settled: a claim (by the hash of the resolve's key, until its
-- lease ends) while the provider is asked, then the refund it started.
-- resolution_status: processing|unknown while the refund is in flight (the
-- discrepancy stays open and held), succeeded, or failed (open, free).
-- resolution_adopt is what the provider showed, recorded on the payment
-- only when the refund succeeds.
ALTER TABLE discrepancies
    ADD COLUMN claim_key_hash       bytea,
    ADD COLUMN claimed_until        timestamptz,
    ADD COLUMN resolution_status    text CHECK (resolution_status IN ('processing', 'unknown', 'succeeded', 'failed')),
    ADD COLUMN resolution_refund_id text REFERENCES refunds (id),
    ADD COLUMN resolution_actor     text,
    ADD COLUMN resolution_reason    text,
    ADD COLUMN resolution_at        timestamptz,
    ADD COLUMN resolution_adopt     jsonb;

-- Resolutions made before held nothing: show what they did.
UPDATE discrepancies SET resolution_status = 'succeeded', resolution_actor = resolved_by, resolution_at = resolved_at
WHERE status = 'resolved';

-- +goose Down
ALTER TABLE discrepancies
    DROP COLUMN claim_key_hash,
    DROP COLUMN claimed_until,
    DROP COLUMN resolution_status,
    DROP COLUMN resolution_refund_id,
    DROP COLUMN resolution_actor,
    DROP COLUMN resolution_reason,
    DROP COLUMN resolution_at,
    DROP COLUMN resolution_adopt;
DELETE FROM discrepancies WHERE kind = 'missing_at_provider';
ALTER TABLE discrepancies DROP CONSTRAINT discrepancies_kind_check;
ALTER TABLE discrepancies ADD CONSTRAINT discrepancies_kind_check
    CHECK (kind IN ('status_mismatch', 'paid_at_provider_not_here', 'amount_captured_mismatch',
                    'amount_refunded_mismatch', 'disputed'));
