-- The minimal SQL of one create, for pgbench: the ceiling the service's
-- create is measured against. Transaction 1 reserves the key and writes the
-- payment, its attempt and the event; transaction 2 stores the outcome, the
-- response under the key and the event. Events take their transaction's id
-- and a sequence number from column defaults: no row every writer of the
-- account locks, as in the service (migration 00014).
-- Variables (-D): acct, run, i (0), attempt_request, event_payload,
-- response_body. :id is unique per run, client and iteration. pgbench
-- substitutes :name even inside string literals, hence ':' || 'autorizar'.
\set i :i + 1
\set id :run * 1000000000000 + :client_id * 100000000 + :i
BEGIN;
INSERT INTO idempotency_keys (account_id, operation, key_hash, fingerprint, state, lease_expires_at,
                              payment_id, attempt_id, created_at, updated_at)
VALUES (:acct, 'payments.create', sha256(int8send(CAST(:id AS bigint))), sha256(int8send(-CAST(:id AS bigint))),
        'in_progress', now() + interval '30 seconds',
        'pay_pgb_' || CAST(:id AS text), 'att_pgb_' || CAST(:id AS text), now(), now())
ON CONFLICT (account_id, operation, key_hash) DO NOTHING;
INSERT INTO payments (id, account_id, order_id, attempt, amount, currency, capture_method, payment_method,
                      customer_id, description, metadata, status, created_at, updated_at)
VALUES ('pay_pgb_' || CAST(:id AS text), :acct, 'ord_pgb_' || CAST(:id AS text), 1, 1000, 'BRL', 'manual',
        'pm_card_visa', '', '', '{}', 'processing', now(), now());
INSERT INTO attempts (id, account_id, payment_id, order_id, operation, number, provider_key, status,
                      request, lease_expires_at, created_at, updated_at)
VALUES ('att_pgb_' || CAST(:id AS text), :acct, 'pay_pgb_' || CAST(:id AS text), 'ord_pgb_' || CAST(:id AS text),
        'autorizar', 1, 'ord_pgb_' || CAST(:id AS text) || ':' || 'autorizar-v1', 'processing',
        CAST(:attempt_request AS jsonb), now() + interval '30 seconds', now(), now());
INSERT INTO events (id, account_id, payment_id, type, payload, created_at)
VALUES ('evt_pgb_' || CAST(:id AS text) || '_1', :acct, 'pay_pgb_' || CAST(:id AS text), 'payment.processing',
        CAST(:event_payload AS json), now());
COMMIT;
BEGIN;
UPDATE idempotency_keys
SET state = 'completed', lease_expires_at = NULL, response_status = 201,
    response_body = convert_to(:response_body, 'UTF8'), completed_at = now(), updated_at = now()
WHERE account_id = :acct AND operation = 'payments.create' AND key_hash = sha256(int8send(CAST(:id AS bigint)));
UPDATE payments
SET status = 'authorized', provider_payment_id = 'pi_pgb_' || CAST(:id AS text), updated_at = now()
WHERE id = 'pay_pgb_' || CAST(:id AS text);
INSERT INTO events (id, account_id, payment_id, type, payload, created_at)
VALUES ('evt_pgb_' || CAST(:id AS text) || '_2', :acct, 'pay_pgb_' || CAST(:id AS text), 'payment.authorized',
        CAST(:event_payload AS json), now());
COMMIT;
