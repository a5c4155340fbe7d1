-- Purges the stored responses of one batch of completed keys to tombstones:
-- the scope, fingerprint and payment id stay, so a late retry still replays
-- the payment's current state and never executes again. Only completed keys:
-- an in-progress or unknown key has no known outcome yet. SKIP LOCKED passes
-- over rows a request or another purger holds. Served by the partial index
-- idempotency_keys_completed. ARRAY() makes the batch an init plan, so the
-- outer statement fetches the ids by primary key even under a generic plan,
-- which cannot see the LIMIT and would otherwise scan the whole table.
-- name: IdempotencyKeyPurgeResponses :execrows
UPDATE idempotency_keys
SET response_kind = NULL, response_status = NULL, response_body = NULL, purged_at = @now::timestamptz, updated_at = @now::timestamptz
WHERE id = ANY(ARRAY(
    SELECT k.id FROM idempotency_keys k
    WHERE k.state = 'completed'
      AND k.purged_at IS NULL
      AND k.completed_at < @completed_before::timestamptz
    ORDER BY k.completed_at
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
));


-- A tombstone is kept for IDEMPOTENCY_TOMBSTONE_TTL after its response was
-- purged; idempotency_keys_purged serves the lookup.
-- name: IdempotencyKeyDeleteTombstones :execrows
DELETE FROM idempotency_keys
WHERE id = ANY(ARRAY(
    SELECT k.id FROM idempotency_keys k
    WHERE k.state = 'completed'
      AND k.purged_at IS NOT NULL
      AND k.purged_at < @purged_before::timestamptz
    ORDER BY k.purged_at
    LIMIT @max_rows
    FOR UPDATE SKIP LOCKED
));
