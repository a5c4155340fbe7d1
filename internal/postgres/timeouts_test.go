package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/peterldowns/pgtestdb"
)

func TestSessionTimeouts(t *testing.T) {
	t.Parallel()

	// Per transaction with SET LOCAL and per statement outside one with
	// set_config(..., true), never at connection start (a transaction
	// pooler refuses startup parameters) nor by a session SET (it would
	// leak to the pooler's other clients).
	t.Run("SetPerTransactionAndPerStatement", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, b := setup(t, nil, postgres.WithSessionTimeouts(5*time.Second, 2*time.Second, 10*time.Second))
		want := map[string]string{"statement_timeout": "5s", "lock_timeout": "2s", "idle_in_transaction_session_timeout": "10s"}
		var pid uint32
		err := store.WithTx(ctx, func(tx payment.Tx) error {
			pid = postgres.RawTx(tx).Conn().PgConn().PID()
			for name, want := range want {
				var got string
				if err := postgres.RawTx(tx).QueryRow(ctx, "SHOW "+name).Scan(&got); err != nil {
					return err
				}
				if got != want {
					t.Errorf("in a transaction, %s = %s, want %s", name, got, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range want {
			var got string
			if err := postgres.Outside(b.db).QueryRow(ctx, "SHOW "+name).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("outside a transaction, %s = %s, want %s", name, got, want)
			}
		}
		// After both, on the same connection: nothing from the client or
		// the session.
		conn, err := b.db.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if conn.Conn().PgConn().PID() != pid {
			t.Fatalf("the pool gave another connection")
		}
		for name := range want {
			var source string
			if err := conn.QueryRow(ctx, "SELECT source FROM pg_settings WHERE name = $1", name).Scan(&source); err != nil {
				t.Fatal(err)
			}
			if source == "client" || source == "session" {
				t.Errorf("%s from %s after the transaction, want the server's own", name, source)
			}
		}
	})

	// On a direct URL, AtConnectionStart also bounds the statements the
	// service does not send itself (the delivery queue's).
	t.Run("AtConnectionStartOnADirectURL", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		db, err := postgres.Open(ctx, postgrestest.URL(t), postgres.WithSessionTimeouts(5*time.Second, 2*time.Second, 10*time.Second),
			postgres.AtConnectionStart())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var got, source string
		if err := db.Pool.QueryRow(ctx, "SELECT setting, source FROM pg_settings WHERE name = 'lock_timeout'").Scan(&got, &source); err != nil {
			t.Fatal(err)
		}
		if got != "2000" || source != "client" {
			t.Errorf("lock_timeout = %s from %s, want 2000 from client", got, source)
		}
	})

	// Each timeout ends the wait of a request behind a stalled writer, and
	// the request answers 503 unavailable, retried with the same key,
	// rather than 500.
	holdLock := func(t *testing.T, b *bundle) {
		t.Helper()
		ctx := context.Background()
		tx, err := b.admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		if _, err := tx.Exec(ctx, "SELECT 1 FROM payments WHERE id = $1 FOR UPDATE", b.payment.ID); err != nil {
			t.Fatal(err)
		}
	}
	lockPayment := func(ctx context.Context, store *postgres.PaymentStore, p *payment.Payment) error {
		return store.WithTx(ctx, func(tx payment.Tx) error {
			_, err := tx.PaymentGetByIDForUpdate(ctx, p.AccountID, p.ID)
			return err
		})
	}
	for _, tc := range []struct {
		name                      string
		statement, lock, idleInTx time.Duration
		idle                      time.Duration // inside the transaction, before locking
		code                      string
	}{
		{name: "LockWaitIsUnavailable", lock: 200 * time.Millisecond, code: "55P03"},
		{name: "LongStatementIsUnavailable", statement: 200 * time.Millisecond, code: "57014"},
		{name: "IdleInTransactionIsUnavailable", idleInTx: 200 * time.Millisecond, idle: time.Second, code: "25P03"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A hang fails the test instead of hanging it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			store, b := setup(t, nil, postgres.WithSessionTimeouts(tc.statement, tc.lock, tc.idleInTx))
			if tc.idle == 0 {
				holdLock(t, b)
			}
			err := store.WithTx(ctx, func(tx payment.Tx) error {
				if _, err := tx.AttemptGetByID(ctx, "att_none"); !errors.Is(err, payment.ErrNotFound) {
					return err
				}
				time.Sleep(tc.idle)
				_, err := tx.PaymentGetByIDForUpdate(ctx, b.payment.AccountID, b.payment.ID)
				return err
			})
			if ctx.Err() != nil {
				t.Fatalf("no answer before the test's deadline: %v", err)
			}
			if !errors.Is(err, postgres.ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable (503)", err)
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != tc.code {
				t.Fatalf("err = %v, want SQLSTATE %s", err, tc.code)
			}
			if tc.idle == 0 {
				return
			}
			// The pool replaces the connection the server ended.
			if err := lockPayment(ctx, store, b.payment); err != nil {
				t.Fatalf("next transaction: %v", err)
			}
		})
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	// Migrations may wait for serving transactions and run long DDL: the
	// pool's statement and lock timeouts would make an instance fail to
	// start.
	t.Run("RunsWithoutStatementAndLockTimeouts", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		_, b := setup(t, nil, postgres.WithSessionTimeouts(5*time.Second, 2*time.Second, 10*time.Second))
		sqlDB := postgres.MigrationDB(b.db)
		defer sqlDB.Close()
		for name, want := range map[string]string{
			"statement_timeout": "0", "lock_timeout": "0", "idle_in_transaction_session_timeout": "10s",
		} {
			var got string
			if err := sqlDB.QueryRowContext(ctx, "SHOW "+name).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("migration connection %s = %s, want %s", name, got, want)
			}
		}
		if err := postgres.Migrate(ctx, b.db); err != nil {
			t.Fatalf("migrate an up-to-date database: %v", err)
		}
	})

	// Instances starting together on a fresh database, each with the
	// session timeouts: one migrates, the others wait and find it done.
	t.Run("ManyInstancesAtOnce", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		dbURL := pgtestdb.Custom(t, postgrestest.ServerConfig(t), pgtestdb.NoopMigrator{}).URL()
		const instances = 5
		errs := make(chan error, instances)
		for range instances {
			go func() {
				db, err := postgres.Open(ctx, dbURL, postgres.WithSessionTimeouts(5*time.Second, 2*time.Second, 10*time.Second))
				if err != nil {
					errs <- err
					return
				}
				defer db.Close()
				errs <- postgres.Migrate(ctx, db)
			}()
		}
		for range instances {
			if err := <-errs; err != nil {
				t.Errorf("migrate: %v", err)
			}
		}
		db, err := postgres.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Ready(ctx); err != nil {
			t.Fatalf("ready after migrating: %v", err)
		}
	})
}
