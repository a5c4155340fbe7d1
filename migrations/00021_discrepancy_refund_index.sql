-- +goose NO TRANSACTION
-- +goose Up
-- Settling a refund finds the discrepancy it resolves; one discrepancy per
-- refund.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS discrepancies_refund ON discrepancies (resolution_refund_id)
    WHERE resolution_refund_id IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS discrepancies_refund;
