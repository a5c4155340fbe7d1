package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/postgres"
)

// Each retention batch reads about as many index entries as it handles,
// whatever the number of keys not yet expired: the purge walks
// idempotency_keys_completed and the delete idempotency_keys_purged in
// expiry order from the oldest, and stops at its limit.
func TestRetentionBatchesReadOnlyWhatTheyHandle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, exec := planDB(t)
	// 2,000 of each kind kept, 50 of each expired: responses completed and
	// tombstones purged a year ago.
	exec(`INSERT INTO idempotency_keys (account_id, operation, key_hash, fingerprint, state, response_status, response_body,
		                              purged_at, created_at, updated_at, completed_at)
		SELECT 'acct_1', 'payments.create', sha256(convert_to('k' || i, 'UTF8')), '\x00', 'completed',
		       CASE WHEN i % 2 = 0 THEN 201 END, CASE WHEN i % 2 = 0 THEN '\x7b7d'::bytea END,
		       CASE WHEN i % 2 = 1 THEN now() - CASE WHEN i <= 100 THEN interval '1 year' ELSE interval '1 hour' END END,
		       now() - interval '2 years', now() - interval '2 years',
		       now() - CASE WHEN i <= 100 THEN interval '1 year' ELSE interval '1 hour' END
		FROM generate_series(1, 4100) AS i`)
	exec(`ANALYZE idempotency_keys`)
	read := func(index string) int64 {
		t.Helper()
		var n int64
		exec(`SELECT pg_stat_force_next_flush()`)
		if err := db.Pool.QueryRow(ctx, `SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = $1`, index).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	store := postgres.NewRetentionStore(db)
	cutoff, now := time.Now().Add(-24*time.Hour), time.Now()
	for _, c := range []struct {
		index string
		run   func() (int, error)
	}{
		{"idempotency_keys_completed", func() (int, error) { return store.IdempotencyKeyPurgeResponses(ctx, cutoff, now, 10) }},
		{"idempotency_keys_purged", func() (int, error) { return store.IdempotencyKeyDeleteTombstones(ctx, cutoff, 10) }},
	} {
		before := read(c.index)
		n, err := c.run()
		if err != nil || n != 10 {
			t.Fatalf("%s: a batch of 10 handled %d, %v", c.index, n, err)
		}
		if got := read(c.index) - before; got > 20 {
			t.Errorf("a batch of 10 read %d entries of %s among 2,000 keys not expired, want about 10", got, c.index)
		}
	}
}
