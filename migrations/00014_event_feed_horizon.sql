-- +goose Up
-- The feed drops the per-account counter row (account_event_seqs), which
-- every state change of an account locked until its commit: one merchant's
-- writes went one commit at a time. An event now records the id of the
-- transaction that wrote it (xid8: 64 bits, never wraps) and takes its seq
-- from a sequence, which nobody waits on. The feed orders by (xid, seq) and
-- serves only events of transactions older than the oldest one still
-- running, so a late commit can never land behind a served cursor (see
-- internal/payment/events.go).
--
-- Events written before this migration keep their per-account seq and get
-- xid 0: they come first, in their old order, and an old cursor N is the
-- position (0, N).
-- A constant default first: no rewrite of the table.
ALTER TABLE events ADD COLUMN xid xid8 NOT NULL DEFAULT '0';
ALTER TABLE events ALTER COLUMN xid SET DEFAULT pg_current_xact_id();

CREATE SEQUENCE events_seq AS bigint OWNED BY events.seq;
SELECT setval('events_seq', COALESCE((SELECT max(seq) FROM events), 0) + 1, false);
ALTER TABLE events ALTER COLUMN seq SET DEFAULT nextval('events_seq');

ALTER TABLE events DROP CONSTRAINT events_account_seq;
CREATE INDEX events_account_position ON events (account_id, xid, seq);

-- The position a consumer last passed back, as (xid, seq).
ALTER TABLE accounts ADD COLUMN events_read_xid xid8 NOT NULL DEFAULT '0';

DROP TABLE account_event_seqs;

-- +goose Down
CREATE TABLE account_event_seqs (
    account_id text PRIMARY KEY REFERENCES accounts (id),
    seq        bigint NOT NULL
);
-- Renumber per account in feed order, so the old counter carries on.
UPDATE events e SET seq = r.n
FROM (SELECT id, row_number() OVER (PARTITION BY account_id ORDER BY xid, seq) AS n FROM events) r
WHERE r.id = e.id;
INSERT INTO account_event_seqs (account_id, seq)
SELECT account_id, max(seq) FROM events GROUP BY account_id;
-- Read positions of the new numbering cannot be mapped back exactly: a
-- consumer's backlog restarts from its last pre-migration cursor at worst.
UPDATE accounts SET events_read_seq = 0 WHERE events_read_xid <> '0';
ALTER TABLE accounts DROP COLUMN events_read_xid;
DROP INDEX events_account_position;
ALTER TABLE events ADD CONSTRAINT events_account_seq UNIQUE (account_id, seq);
ALTER TABLE events ALTER COLUMN seq DROP DEFAULT;
DROP SEQUENCE events_seq;
ALTER TABLE events DROP COLUMN xid;
