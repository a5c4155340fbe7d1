-- The statements paybench runs itself, named like the service's queries.
-- {{db}} is replaced by a quoted identifier; everything else is a parameter.

-- name: BenchDatabaseCreate
CREATE DATABASE {{db}};

-- name: BenchDatabaseDrop
DROP DATABASE IF EXISTS {{db}} WITH (FORCE);

-- How many more connections the server accepts, leaving the reserved
-- superuser slots alone: pgbench's client count is capped by it.
-- name: ConnectionsFree
SELECT current_setting('max_connections')::int
     - current_setting('superuser_reserved_connections')::int
     - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int;

-- name: ServerSettings
SELECT current_setting('server_version') || ', max_connections=' || current_setting('max_connections')
    || ', shared_buffers=' || current_setting('shared_buffers')
    || ', fsync=' || current_setting('fsync')
    || ', synchronous_commit=' || current_setting('synchronous_commit')
    || ', autovacuum=' || current_setting('autovacuum');

-- Before every step: the dead row versions of the previous step (the
-- account row alone gets two per create) are gone, as autovacuum would have
-- removed them, whatever the server's autovacuum setting.
-- name: BenchVacuum
VACUUM;

-- Other tenants and their past payments, so the bench database looks like
-- one in use rather than an empty one: on a table of a page or two the
-- planner checks foreign keys by scanning it, and keeps that plan while the
-- table grows by thousands of rows within a step. $1 tenants.
-- name: SeedTenants
INSERT INTO accounts (id, name, api_key_hash, stripe_secret_enc, stripe_secret_hmac, created_at)
SELECT 'acct_seed_' || g, 'seeded tenant ' || g, sha256(convert_to('seed-api-' || g, 'UTF8')), '\x00',
       sha256(convert_to('seed-hmac-' || g, 'UTF8')), now() - interval '1 year'
FROM generate_series(1, $1::int) AS g;

-- $1 payments spread over $2 seeded tenants, each captured by one attempt.
-- name: SeedPayments
INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method,
                      status, provider_payment_id, amount_captured, created_at, updated_at)
SELECT 'pay_seed_' || g, 'acct_seed_' || (1 + g % $2::int), 'ord_seed_' || g, 1, 1999, 'BRL', 'automatic',
       'pm_card_visa', 'captured', 'pi_seed_' || g, 1999, now() - interval '1 day', now() - interval '1 day'
FROM generate_series(1, $1::int) AS g;

-- name: SeedAttempts
INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status, request,
                      provider_object_id, created_at, updated_at)
SELECT 'att_seed_' || g, 'acct_seed_' || (1 + g % $2::int), 'pay_seed_' || g, 'ord_seed_' || g, 'autorizar', 1,
       'ord_seed_' || g || ':autorizar-v1', 'succeeded', '{}', 'pi_seed_' || g,
       now() - interval '1 day', now() - interval '1 day'
FROM generate_series(1, $1::int) AS g;

-- The seeded payments' completed keys: without them the key table starts
-- the first create step empty, and a statement planned then scans it for
-- the whole step.
-- name: SeedKeys
INSERT INTO idempotency_keys (account_id, operation, key_hash, fingerprint, state, payment_id, attempt_id,
                              response_status, response_body, created_at, updated_at, completed_at)
SELECT 'acct_seed_' || (1 + g % $2::int), 'payments.create', sha256(convert_to('seed-key-' || g, 'UTF8')),
       sha256(convert_to('seed-fp-' || g, 'UTF8')), 'completed', 'pay_seed_' || g, 'att_seed_' || g,
       201, convert_to('{}', 'UTF8'), now() - interval '1 day', now() - interval '1 day', now() - interval '1 day'
FROM generate_series(1, $1::int) AS g;

-- name: BenchVacuumAnalyze
VACUUM (ANALYZE);

-- The account pgbench writes as: its own row, so its event sequence is its
-- own, like a second tenant of the same database.
-- name: CeilingAccountSeed
INSERT INTO accounts (id, name, api_key_hash, stripe_secret_enc, stripe_secret_hmac, created_at)
VALUES ($1, 'paybench ceiling', sha256(convert_to($1 || ':api', 'UTF8')), '\x00', sha256(convert_to($1 || ':hmac', 'UTF8')), now())
ON CONFLICT (id) DO NOTHING;

-- Real payloads of the service's own rows, so pgbench writes the same sizes.
-- name: PayloadSamples
SELECT (SELECT request::text FROM attempts WHERE account_id = $1 LIMIT 1),
       (SELECT payload::text FROM events WHERE account_id = $1 AND type <> 'payment.processing' LIMIT 1),
       (SELECT convert_from(response_body, 'UTF8') FROM idempotency_keys
         WHERE account_id = $1 AND response_status = 201 LIMIT 1);

-- The single indexed read a replay needs, served by the minimal server.
-- name: ReplayResponseGet
SELECT response_status, response_body FROM idempotency_keys
WHERE account_id = $1 AND operation = 'payments.create' AND key_hash = $2;

-- name: HistoryUniqueConstraints
SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint
WHERE conrelid = 'idempotency_keys'::regclass AND contype = 'u'
ORDER BY conname;

-- Secondary indexes that are not a constraint's; the primary key stays, as
-- identity ids arrive in order and cost little to append.
-- name: HistoryPlainIndexes
SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index
WHERE indrelid = 'idempotency_keys'::regclass AND NOT indisprimary
  AND indexrelid NOT IN (SELECT conindid FROM pg_constraint WHERE conrelid = 'idempotency_keys'::regclass)
ORDER BY 1;

-- The bulk load skips the foreign key triggers (the rows refer only to the
-- bench account) and does not wait for its commits.
-- name: HistorySessionReplica
SET session_replication_role = replica;

-- name: HistorySessionAsync
SET synchronous_commit = off;

-- Rebuilding an index after the load sorts once instead of inserting ten
-- million random keys one by one.
-- name: HistorySessionSortMemory
SET maintenance_work_mem = '512MB';

-- name: HistoryConstraintDrop
ALTER TABLE idempotency_keys DROP CONSTRAINT {{name}};

-- A B-tree grown by random keys settles about 70% full; one built by
-- sorting packs its leaves to 90%. The unique index on key hashes is built
-- 70% full, like the index of a real history, and the setting is reset
-- afterwards so the schema stays exactly the migrated one (fillfactor only
-- matters while an index is built).
-- name: HistoryConstraintAdd
ALTER TABLE idempotency_keys ADD CONSTRAINT {{name}} {{def}} WITH (fillfactor = 70);

-- name: HistoryIndexReset
ALTER INDEX {{name}} RESET (fillfactor);

-- name: HistoryIndexDrop
DROP INDEX {{name}};

-- {{def}} is the whole CREATE INDEX statement from pg_get_indexdef.
-- name: HistoryIndexCreate
{{def}};

-- The history a tenant accumulates under the default windows: keys spread
-- over the last 399 days, the ones older than IDEMPOTENCY_RESPONSE_TTL (72h)
-- already purged to tombstones, the recent ones completed with a stored
-- response. Nothing is old enough for the purge job to touch. $1 account,
-- $2..$3 this chunk of the series, $4 the total, $5 a stored response.
-- name: HistoryInsert
INSERT INTO idempotency_keys (account_id, operation, key_hash, fingerprint, state, response_status, response_body,
                              created_at, updated_at, completed_at, purged_at)
SELECT $1, 'payments.create', sha256(int8send(g) || '\x686973746f7279'::bytea), sha256(int8send(-g)), 'completed', 201,
       CASE WHEN s.t > now() - interval '72 hours' THEN $5::bytea END,
       s.t, s.t, s.t,
       CASE WHEN s.t <= now() - interval '72 hours' THEN s.t + interval '72 hours' END
FROM generate_series($2::bigint, $3::bigint) AS g,
     LATERAL (SELECT now() - interval '399 days' * (($4::bigint - g)::float8 / $4::bigint) AS t) AS s;

-- name: HistoryVacuum
VACUUM (ANALYZE) idempotency_keys;

-- name: Checkpoint
CHECKPOINT;

-- name: HistorySizes
SELECT (SELECT count(*) FROM idempotency_keys),
       pg_size_pretty(pg_total_relation_size('idempotency_keys')),
       pg_size_pretty(pg_relation_size((SELECT conindid FROM pg_constraint
                                        WHERE conrelid = 'idempotency_keys'::regclass AND contype = 'u' LIMIT 1)));

-- The backlog mode's payments left unknown by a provider outage: $1
-- payments of account $2, each with one authorization attempt whose
-- outcome is unknown, made $3 ago (past the re-send window: the reconciler
-- looks each one up by search) and never claimed, so all are due.
-- name: BacklogUnknownPayments
INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method,
                      status, created_at, updated_at)
SELECT 'pay_unk_' || g, $2, 'ord_unk_' || g, 1, 1999, 'BRL', 'manual', 'pm_card_visa', 'unknown',
       now() - $3::interval, now() - $3::interval
FROM generate_series(1, $1::int) AS g;

-- name: BacklogUnknownAttempts
INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status, request,
                      created_at, updated_at)
SELECT 'att_unk_' || g, $2, 'pay_unk_' || g, 'ord_unk_' || g, 'autorizar', 1, 'ord_unk_' || g || ':autorizar-v1',
       'unknown', '{}', now() - $3::interval, now() - $3::interval
FROM generate_series(1, $1::int) AS g;

-- $1 Pix payments of account $2 waiting for the customer, payable for a
-- day more, each due for its next poll at a moment of the last minute.
-- name: BacklogWaitingPayments
INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method,
                      status, provider_payment_id, method_options, action_expires_at, created_at, updated_at)
SELECT 'pay_pix_' || g, $2, 'ord_pix_' || g, 1, 1999, 'BRL', 'automatic', 'pix', 'requires_action',
       'pi_pix_' || g, '{"expires_in": 86400}', now() + interval '1 day', now() - interval '10 minutes',
       now() - interval '10 minutes'
FROM generate_series(1, $1::int) AS g;

-- name: BacklogWaitingAttempts
INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status, request,
                      provider_object_id, reconcile_tries, next_reconcile_at, created_at, updated_at)
SELECT 'att_pix_' || g, $2, 'pay_pix_' || g, 'ord_pix_' || g, 'autorizar', 1, 'ord_pix_' || g || ':autorizar-v1',
       'waiting', '{}', 'pi_pix_' || g, 1, now() - (g % 60) * interval '1 second',
       now() - interval '10 minutes', now() - interval '10 minutes'
FROM generate_series(1, $1::int) AS g;

-- $1 completed keys of account $2 past every retention window: half with
-- their response still stored (to purge), half tombstones (to delete).
-- name: BacklogExpiredKeys
INSERT INTO idempotency_keys (account_id, operation, key_hash, fingerprint, state, payment_id,
                              response_status, response_body, purged_at, created_at, updated_at, completed_at)
SELECT $2, 'payments.create', sha256(convert_to('old-key-' || g, 'UTF8')), sha256(convert_to('old-fp-' || g, 'UTF8')),
       'completed', NULL,
       CASE WHEN g % 2 = 0 THEN 201 END, CASE WHEN g % 2 = 0 THEN convert_to('{}', 'UTF8') END,
       CASE WHEN g % 2 = 1 THEN now() - interval '500 days' END,
       now() - interval '501 days', now() - interval '501 days', now() - interval '501 days'
FROM generate_series(1, $1::int) AS g;

-- What is left of each job's pass that began at $1: unresolved attempts due
-- before it, waiting attempts due before it, stored responses past $2's
-- response window and tombstones past $3's.
-- name: BacklogProgress
SELECT count(*) FILTER (WHERE status IN ('processing', 'unknown')),
       count(*) FILTER (WHERE status = 'waiting'),
       (SELECT count(*) FROM idempotency_keys WHERE state = 'completed' AND purged_at IS NULL AND completed_at < $2),
       (SELECT count(*) FROM idempotency_keys WHERE state = 'completed' AND purged_at < $3)
FROM attempts
WHERE status IN ('processing', 'unknown', 'waiting') AND COALESCE(next_reconcile_at, updated_at) < $1;
