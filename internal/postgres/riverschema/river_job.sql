-- For sqlc only, never applied: the columns of River's job table
-- (created by River's own migrations, rivermigrate) that our queries read,
-- with the types River gives them. TestRiverSchema checks them against the
-- migrated table.
CREATE TYPE river_job_state AS ENUM (
    'available', 'cancelled', 'completed', 'discarded', 'pending', 'retryable', 'running', 'scheduled'
);

CREATE TABLE river_job (
    id bigint PRIMARY KEY,
    state river_job_state NOT NULL,
    created_at timestamptz NOT NULL,
    args jsonb NOT NULL,
    kind text NOT NULL
);
