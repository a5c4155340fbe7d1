-- The age of the oldest transaction with an xid, running or prepared, in
-- the whole cluster: the feed serves nothing it or any later transaction
-- wrote until it ends. System views are named with their schema, which is
-- how sqlc finds them.
-- name: ServerFeedLag :one
SELECT COALESCE(EXTRACT(EPOCH FROM (clock_timestamp() - MIN(started))), 0)::float8 AS lag_seconds
FROM (
    SELECT xact_start AS started FROM pg_catalog.pg_stat_activity WHERE backend_xid IS NOT NULL AND xact_start IS NOT NULL
    UNION ALL
    SELECT prepared FROM pg_catalog.pg_prepared_xacts
) running;

-- SHOW transaction_read_only, as a query sqlc can type.
-- name: ServerTransactionReadOnly :one
SELECT current_setting('transaction_read_only')::text AS read_only;

-- Where a setting's value came from ("client": a startup parameter).
-- name: ServerSettingSource :one
SELECT source::text FROM pg_catalog.pg_settings WHERE name = sqlc.arg(name)::text;

-- The databases of the cluster but template0, which takes no connections.
-- name: ServerDatabasesConnectable :many
SELECT datname::text FROM pg_catalog.pg_database WHERE datname <> 'template0' ORDER BY datname;

-- The next xid8 a transaction would get now, as text (pgx has no xid8).
-- name: ServerNextXid :one
SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS next_xid;

-- Waits for and takes a lock held until the transaction ends.
-- name: ServerAdvisoryXactLock :exec
SELECT pg_advisory_xact_lock(sqlc.arg(key)::bigint);

-- The oldest xid8 still running, as text: every transaction below it has
-- ended.
-- name: ServerOldestXid :one
SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS oldest_xid;
