-- +goose Up
-- Disputes the provider reported for a payment (charge.dispute.* events),
-- rendered as the payment's disputes list; always a list, empty by default.
ALTER TABLE payments ADD COLUMN disputes jsonb NOT NULL DEFAULT '[]';

-- The audit pages final payments changed within its window.
CREATE INDEX payments_final_updated ON payments (updated_at, id)
    WHERE status IN ('authorized', 'captured', 'declined', 'failed', 'canceled');

-- A difference between our record of a final payment and the provider's,
-- found by the audit. The audit only records; an operator resolves.
CREATE TABLE discrepancies (
    id              text PRIMARY KEY,
    account_id      text NOT NULL REFERENCES accounts (id),
    payment_id      text NOT NULL REFERENCES payments (id),
    kind            text NOT NULL CHECK (kind IN ('status_mismatch', 'paid_at_provider_not_here',
                        'amount_captured_mismatch', 'amount_refunded_mismatch', 'disputed')),
    ours            jsonb NOT NULL,
    theirs          jsonb NOT NULL,
    status          text NOT NULL CHECK (status IN ('open', 'resolved')),
    first_seen_at   timestamptz NOT NULL,
    last_checked_at timestamptz NOT NULL,
    resolved_at     timestamptz,
    resolved_by     text,
    resolution      text CHECK (resolution IN ('adopt_provider_state', 'refund', 'note'))
);

-- One open discrepancy per payment and kind: the audit's upsert target.
CREATE UNIQUE INDEX discrepancies_one_open ON discrepancies (payment_id, kind) WHERE status = 'open';
CREATE INDEX discrepancies_payment ON discrepancies (payment_id, id);
CREATE INDEX discrepancies_open ON discrepancies (id) WHERE status = 'open';

-- +goose Down
DROP TABLE discrepancies;
DROP INDEX payments_final_updated;
ALTER TABLE payments DROP COLUMN disputes;
