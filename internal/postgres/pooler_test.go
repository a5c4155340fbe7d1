package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Through PgBouncer in transaction mode (Debian's 1.18 and its default
// pgbouncer.ini: no ignore_startup_parameters, no protocol-level prepared
// statements), as docs/operating.md's "Production database" sets it up.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	direct := postgrestest.URL(t)
	pooled := postgrestest.PgBouncer(t, direct)
	to := postgrestest.PooledTimeouts

	// Nothing is sent at connection start, which PgBouncer would refuse;
	// every transaction sets the timeouts, and they do not outlive it on
	// the server connection that the next client gets.
	t.Run("TransactionsKeepTheirTimeouts", func(t *testing.T) {
		db, err := postgres.Open(ctx, pooled, postgres.WithSessionTimeouts(to[0], to[1], to[2]))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		store := postgres.NewPaymentStore(db)
		err = store.WithTx(ctx, func(tx payment.Tx) error {
			for name, want := range map[string]string{
				"statement_timeout": "5s", "lock_timeout": "2s", "idle_in_transaction_session_timeout": "10s",
			} {
				var got string
				if err := postgres.RawTx(tx).QueryRow(ctx, "SHOW "+name).Scan(&got); err != nil {
					return err
				}
				if got != want {
					t.Errorf("in a transaction through PgBouncer, %s = %s, want %s", name, got, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Another client of the pooler: no setting left behind.
		other, err := postgres.Open(ctx, pooled)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		var leaked int
		if err := other.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_settings WHERE source = 'session'
			AND name IN ('statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout')`).Scan(&leaked); err != nil {
			t.Fatal(err)
		}
		if leaked != 0 {
			t.Errorf("%d session timeouts left on a pooled server connection", leaked)
		}
	})

	// The execution mode comes from the connection string: cache_describe
	// works through the pooler under concurrency.
	t.Run("ConcurrentTransactions", func(t *testing.T) {
		db, err := postgres.Open(ctx, pooled, postgres.WithSessionTimeouts(to[0], to[1], to[2]))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		store := postgres.NewPaymentStore(db)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- store.WithTx(ctx, func(tx payment.Tx) error {
					_, err := tx.AttemptGetByID(ctx, "att_none")
					if errors.Is(err, payment.ErrNotFound) {
						return nil
					}
					return err
				})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("through PgBouncer with cache_describe: %v", err)
			}
		}
	})

	// A pipelined transaction whose batch fails, at a read or at COMMIT,
	// is ended before its server connection goes back to the pooler: the
	// next transactions, on the same client connection, work.
	t.Run("AFailedBatchEndsItsTransaction", func(t *testing.T) {
		db, err := postgres.Open(ctx, pooled+"&pool_max_conns=1", postgres.WithSessionTimeouts(to[0], to[1], to[2]))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		store := postgres.NewPaymentStore(db)
		p := seed(t, db, store)
		for i := range 10 {
			err := store.WithTx(ctx, func(tx payment.Tx) error {
				if err := tx.PaymentInsert(ctx, p); err != nil {
					return err
				}
				if i%2 == 0 {
					_, err := tx.PaymentGetByIDForUpdate(ctx, p.AccountID, p.ID)
					return err
				}
				return nil
			})
			if err == nil {
				t.Fatalf("round %d: the duplicate insert committed", i)
			}
			err = store.WithTx(ctx, func(tx payment.Tx) error {
				_, err := tx.PaymentGetByIDForUpdate(ctx, p.AccountID, p.ID)
				return err
			})
			if err != nil {
				t.Fatalf("round %d: the transaction after a failed one: %v", i, err)
			}
		}
		var stuck int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&stuck); err != nil {
			t.Fatal(err)
		}
		if stuck != 0 {
			t.Errorf("%d server connections left in a transaction", stuck)
		}
	})

	// A statement sent outside a transaction carries the timeouts too,
	// in the same implicit transaction, and leaves nothing behind.
	t.Run("StatementsOutsideTransactionsAreBounded", func(t *testing.T) {
		db, err := postgres.Open(ctx, pooled, postgres.WithSessionTimeouts(300*time.Millisecond, 200*time.Millisecond, to[2]))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var shown string
		if err := postgres.Outside(db).QueryRow(ctx, "SHOW statement_timeout").Scan(&shown); err != nil || shown != "300ms" {
			t.Errorf("outside a transaction, statement_timeout = %q (%v), want 300ms", shown, err)
		}
		start := time.Now()
		_, err = postgres.Outside(db).Exec(ctx, "SELECT pg_sleep(5)")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "57014" || time.Since(start) > 3*time.Second {
			t.Errorf("a 5 s statement outside a transaction: %v after %s, want 57014 (statement_timeout)", err, time.Since(start))
		}
		admin, err := pgx.Connect(ctx, direct)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "CREATE TABLE held (id int PRIMARY KEY); INSERT INTO held VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		holder, err := admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback(ctx)
		if _, err := holder.Exec(ctx, "SELECT 1 FROM held FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
		_, err = postgres.Outside(db).Exec(ctx, "UPDATE held SET id = 2")
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			t.Errorf("an update of a locked row outside a transaction: %v, want 55P03 (lock_timeout)", err)
		}
		var leaked int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_settings WHERE source <> 'default' AND source <> 'configuration file'
			AND name IN ('statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout')`).Scan(&leaked); err != nil {
			t.Fatal(err)
		}
		if leaked != 0 {
			t.Errorf("%d timeouts left on a pooled server connection", leaked)
		}
	})

	// The migrations' advisory lock is a session's: through the pooler
	// they refuse, in one line naming MIGRATE_DATABASE_URL.
	t.Run("MigrateRefusesThePooler", func(t *testing.T) {
		db, err := postgres.Open(ctx, pooled, postgres.WithSessionTimeouts(to[0], to[1], to[2]))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = postgres.Migrate(ctx, db)
		if !errors.Is(err, postgres.ErrNoSession) {
			t.Fatalf("migrate through PgBouncer: %v, want ErrNoSession", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "MIGRATE_DATABASE_URL") || strings.Contains(msg, "\n") {
			t.Errorf("error %q: want one line naming MIGRATE_DATABASE_URL", msg)
		}
		// The direct URL migrates.
		ddb, err := postgres.Open(ctx, direct, postgres.WithSessionTimeouts(to[0], to[1], to[2]))
		if err != nil {
			t.Fatal(err)
		}
		defer ddb.Close()
		if err := postgres.Migrate(ctx, ddb); err != nil {
			t.Fatalf("migrate through the direct URL: %v", err)
		}
		// Readiness needs no session: it answers through the pooler.
		if err := db.Ready(ctx); err != nil {
			t.Fatalf("ready through PgBouncer: %v", err)
		}
	})
}
