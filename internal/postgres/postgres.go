// Package postgres is the only package that speaks to PostgreSQL: it owns the
// pool, the migrations, the sqlc-generated queries and the translation of
// database errors into domain errors.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres/dbsqlc"
	"github.com/acmepay/payments/migrations"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// DB is a connection pool with the queries bound to it.
type DB struct {
	Pool *pgxpool.Pool
	q    *dbsqlc.Queries
}

// Option adjusts the pool configuration.
type Option func(*pgxpool.Config)

// WithCounter counts the statements and transactions run through the pool.
func WithCounter(c *Counter) Option {
	return func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = c }
}

// Open connects and checks the database answers.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse DATABASE_URL: %w", err)
	}
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: ping: %w", err)
	}
	return &DB{Pool: pool, q: dbsqlc.New(pool)}, nil
}

// Close releases the pool.
func (db *DB) Close() { db.Pool.Close() }

func newGoose(db *DB) (*goose.Provider, func() error, error) {
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	if err != nil {
		sqlDB.Close()
		return nil, nil, err
	}
	return p, sqlDB.Close, nil
}

// Migrate applies every pending migration.
func Migrate(ctx context.Context, db *DB) error {
	p, closeDB, err := newGoose(db)
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	defer closeDB()
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// Ready reports whether the database answers and every migration is applied.
func (db *DB) Ready(ctx context.Context) error {
	p, closeDB, err := newGoose(db)
	if err != nil {
		return err
	}
	defer closeDB()
	pending, err := p.HasPending(ctx)
	if err != nil {
		return err
	}
	if pending {
		return errors.New("migrations pending")
	}
	return nil
}

// withTx runs fn in a transaction.
//
// The isolation level is set, never inherited from the server: the money
// path locks a row and then relies on reading its latest committed version,
// which READ COMMITTED gives and REPEATABLE READ does not (there a lock on a
// row changed since the snapshot fails, and a plain read sees the old row).
// A server default of REPEATABLE READ once left paid payments in processing.
func withTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return translate(err)
	}
	// Unconditional, so that a panic in fn also ends the transaction and
	// returns its connection: a leaked one keeps its locks and makes
	// pool.Close wait for ever. After Commit it is a no-op (pgx.ErrTxClosed).
	// The caller's cancellation must not stop the rollback.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return translate(tx.Commit(ctx))
}

// Unique constraints the domain cares about, by name.
const (
	constraintLiveOrder     = "payments_one_live_per_order"
	constraintPaymentNumber = "payments_account_id_order_id_attempt_key"
	constraintAttemptNumber = "attempts_account_id_order_id_operation_number_key"
	constraintSecretHMAC    = "accounts_stripe_secret_hmac_key"
)

// ErrUnavailable wraps failures to reach the database.
var ErrUnavailable = errors.New("database unavailable")

// translate maps database errors to domain errors, once, here.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return payment.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if pgErr.Code == "23505" {
			switch pgErr.ConstraintName {
			case constraintLiveOrder:
				return payment.ErrLiveOrderConflict
			case constraintPaymentNumber, constraintAttemptNumber:
				return payment.ErrAttemptNumberTaken
			case constraintSecretHMAC:
				return account.ErrCredentialsInUse
			}
		}
		// Connection exceptions, a server shutting down or starting, and
		// transient conflicts: the caller may retry with the same key.
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), pgErr.Code == "57P01", pgErr.Code == "57P02",
			pgErr.Code == "57P03", pgErr.Code == "40001", pgErr.Code == "40P01":
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	var (
		ce     *pgconn.ConnectError
		netErr net.Error
	)
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ce) || errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
