-- +goose Up
-- The per-account event counter moves off the accounts row: every state
-- change bumped it, piling dead versions onto the row every request reads to
-- authenticate and every insert's foreign key check locks.
CREATE TABLE account_event_seqs (
    account_id text PRIMARY KEY REFERENCES accounts (id),
    seq        bigint NOT NULL
);
INSERT INTO account_event_seqs (account_id, seq)
SELECT id, event_seq FROM accounts WHERE event_seq > 0;
ALTER TABLE accounts DROP COLUMN event_seq;

-- +goose Down
ALTER TABLE accounts ADD COLUMN event_seq bigint NOT NULL DEFAULT 0;
UPDATE accounts a SET event_seq = s.seq FROM account_event_seqs s WHERE s.account_id = a.id;
DROP TABLE account_event_seqs;
