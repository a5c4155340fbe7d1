-- +goose Up
-- Each unresolved attempt has its own reconcile schedule: how often the
-- reconciler has claimed it, and when it may claim it again (exponential
-- backoff with jitter, RECONCILE_AFTER up to RECONCILE_MAX_BACKOFF). NULL
-- means due as soon as it is RECONCILE_AFTER old.
ALTER TABLE attempts
    ADD COLUMN reconcile_tries   integer NOT NULL DEFAULT 0,
    ADD COLUMN next_reconcile_at timestamptz;

-- +goose Down
ALTER TABLE attempts DROP COLUMN next_reconcile_at, DROP COLUMN reconcile_tries;
