// Package postgres is the only package that speaks to PostgreSQL: it owns the
// pool, the migrations, the sqlc-generated queries and the translation of
// database errors into domain errors.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres/internal/dbsqlc"
	"github.com/acmepay/payments/migrations"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// DB is a connection pool with the queries bound to it.
type DB struct {
	Pool *pgxpool.Pool
	q    *dbsqlc.Queries
	// begin opens every transaction: READ COMMITTED and the session
	// timeouts again, local to it; queued, they travel with its first
	// statement.
	begin []string
	// bounded runs statements outside transactions with the timeouts.
	bounded  bounded
	timeouts map[string]string
	health   *health
	// river enqueues webhook deliveries inside payment transactions.
	river *River
	// tracing is nil unless WithTracing: then each transaction is a span,
	// and River's inserts and work carry the trace.
	tracing trace.TracerProvider
	tracer  trace.Tracer
}

// Option adjusts the pool configuration.
type Option func(*settings)

// settings is what Options adjust before the pool opens.
type settings struct {
	pool *pgxpool.Config
	// timeouts are the session timeouts set again in every transaction
	// and with every statement sent outside one, by name, in milliseconds.
	timeouts map[string]string
	// atStart: send them at connection start too (AtConnectionStart).
	atStart bool
	tracing trace.TracerProvider
}

// AtConnectionStart also sends the session timeouts as startup
// parameters. Only for a direct URL (MIGRATE_DATABASE_URL), which a
// transaction pooler would refuse: it bounds the statements the service
// does not send itself, such as the delivery queue's (River).
func AtConnectionStart() Option {
	return func(s *settings) { s.atStart = true }
}

// WithTracing makes each transaction a span of tp, and has the delivery
// queue carry the trace of the transaction that enqueued a job to the
// span that works it (a link).
func WithTracing(tp trace.TracerProvider) Option {
	return func(s *settings) { s.tracing = tp }
}

// WithCounter counts the statements and transactions run through the pool.
func WithCounter(c *Counter) Option {
	return func(s *settings) { s.pool.ConnConfig.Tracer = c }
}

// WithSessionTimeouts bounds how long one session can hold up the others: a
// statement runs at most statement, waits for a lock at most lock, and a
// session left idle inside a transaction is ended after idleInTx. Without
// them one stalled writer holding a row lock freezes every request that
// needs the row.
//
// They are never startup parameters, which a transaction pooler refuses
// (PgBouncer 1.18 with its default settings) or drops, and
// never a session SET, which it would leak to other clients. Every
// transaction sets them with SET LOCAL, queued with its BEGIN, and every
// statement sent outside a transaction goes with set_config(..., true) in
// the same implicit transaction (one pipeline, one Sync): no extra round
// trip either way. A zero duration leaves the server's setting.
func WithSessionTimeouts(statement, lock, idleInTx time.Duration) Option {
	return func(s *settings) {
		for name, d := range map[string]time.Duration{
			"statement_timeout":                   statement,
			"lock_timeout":                        lock,
			"idle_in_transaction_session_timeout": idleInTx,
		} {
			if d > 0 {
				s.timeouts[name] = milliseconds(d)
			}
		}
	}
}

// milliseconds rounds up: a positive duration must not become 0, which
// turns the timeout off.
func milliseconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10)
}

// sessionTimeouts are the settings WithSessionTimeouts bounds.
var sessionTimeouts = []string{"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"}

// Open connects and checks the database answers.
//
// The connection string chooses the query execution mode
// (default_query_exec_mode): the default, cache_statement, prepares each
// statement once per connection and is the fastest on a direct
// connection; behind a transaction pooler without protocol-level prepared
// statements (PgBouncer before 1.21) it must be cache_describe or exec.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse DATABASE_URL: %w", err)
	}
	s := &settings{pool: cfg, timeouts: map[string]string{}}
	for _, o := range opts {
		o(s)
	}
	if s.atStart && len(s.timeouts) > 0 {
		if cfg.ConnConfig.RuntimeParams == nil {
			cfg.ConnConfig.RuntimeParams = map[string]string{}
		}
		maps.Copy(cfg.ConnConfig.RuntimeParams, s.timeouts)
	}
	h := &health{}
	cfg.ConnConfig.Tracer = tracers{health: h, other: cfg.ConnConfig.Tracer}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	h.pool.Store(pool)
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: ping: %w", err)
	}
	inserter, err := newInserter(pool, s.tracing)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: job queue: %w", err)
	}
	set := setTimeouts(s.timeouts)
	db := &DB{Pool: pool, bounded: bounded{pool: pool, set: set}, timeouts: s.timeouts, health: h, river: inserter,
		tracing: s.tracing}
	if s.tracing != nil {
		db.tracer = s.tracing.Tracer("github.com/acmepay/payments/internal/postgres")
	}
	db.q = dbsqlc.New(db.bounded)
	// Transaction control (BEGIN here, COMMIT and ROLLBACK in pipeTx) is
	// protocol, not a query: it stays out of sqlc.
	db.begin = []string{"BEGIN ISOLATION LEVEL READ COMMITTED"}
	if set != "" {
		db.begin = append(db.begin, set)
	}
	return db, nil
}

// setTimeouts is one statement setting timeouts (by name, in
// milliseconds) with set_config(..., true), which is SET LOCAL: they end
// with the transaction, explicit or implicit. "" when there are none.
// Built here, not in sqlc: the settings it names vary with the options,
// and the Counter knows it by its prefix.
func setTimeouts(timeouts map[string]string) string {
	var sets []string
	for _, name := range sessionTimeouts {
		if v, ok := timeouts[name]; ok {
			if _, err := strconv.ParseInt(v, 10, 64); err == nil {
				sets = append(sets, fmt.Sprintf("set_config('%s', '%s', true)", name, v))
			}
		}
	}
	if len(sets) == 0 {
		return ""
	}
	return setTimeoutsPrefix + strings.Join(sets, ", ")
}

// setTimeoutsPrefix starts every statement setTimeouts makes; the Counter
// counts it as part of the work it bounds, not as a statement.
const setTimeoutsPrefix = "SELECT /* timeouts */ "

// refusedStartupParameter reports PgBouncer's refusal of a parameter sent
// at connection start.
func refusedStartupParameter(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.Contains(pgErr.Message, "unsupported startup parameter")
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

// migrationDB opens connections for migrations: the pool's settings
// without its statement_timeout and lock_timeout. DDL may run long (an
// index on a big table), and before it can alter a table it waits for the
// transactions of the instances already serving. Cut short by either
// timeout, the migration rolls back and the instance fails to start; in a
// rolling deploy beside busy instances it might never get through. The
// wait is bounded anyway: every serving transaction ends within its own
// timeouts. Meanwhile requests queued behind the migration's lock hit
// their lock_timeout and answer 503, which clients retry.
// idle_in_transaction_session_timeout stays: a migrator stalled inside its
// transaction must not keep those locks.
func migrationDB(db *DB) *sql.DB {
	cc := db.Pool.Config().ConnConfig // a copy
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	migrationParams(cc.RuntimeParams, db.timeouts)
	return stdlib.OpenDB(*cc)
}

// migrationParams sets, as startup parameters of a migration's direct
// connection, no statement or lock timeout and the pool's
// idle_in_transaction_session_timeout. The lock_timeout sent also tells a
// direct connection from a pooler (Migrate).
func migrationParams(params, timeouts map[string]string) {
	params["statement_timeout"] = "0"
	params["lock_timeout"] = "0"
	if v, ok := timeouts["idle_in_transaction_session_timeout"]; ok {
		params["idle_in_transaction_session_timeout"] = v
	}
}

// ErrNoSession is Migrate's refusal to run through a pooler.
var ErrNoSession = errors.New("postgres: migrations need a direct connection to PostgreSQL (their advisory lock is a session's), " +
	"and this one goes through a pooler: set MIGRATE_DATABASE_URL to a direct URL")

// Migrate applies every pending migration, on connections of its own (see
// migrationDB). Any number of instances may migrate at once: one holds a
// session advisory lock while it migrates, the others wait for it (polling
// pg_try_advisory_lock, so no lock_timeout applies) and then find nothing
// left to do. That lock needs a real session: through a transaction pooler
// it would be taken on one server connection and released on another (or
// never), so Migrate refuses a connection that did not get its own startup
// parameters (ErrNoSession).
func Migrate(ctx context.Context, db *DB) error {
	// Every second for up to 10 minutes: room for a long migration of
	// another instance.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 600))
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	sqlDB := migrationDB(db)
	defer sqlDB.Close()
	// The lock_timeout of 0 that migrationDB sends at connection start
	// shows as set by the client only on a direct connection: a pooler
	// rejects or drops startup parameters.
	source, err := settingSource(ctx, sqlDB, "lock_timeout")
	if err != nil {
		if refusedStartupParameter(err) {
			return ErrNoSession
		}
		return fmt.Errorf("postgres: migrations: %w (a pooler in front? set MIGRATE_DATABASE_URL to a direct URL)", err)
	}
	if source != "client" {
		return ErrNoSession
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("postgres: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	// River's own tables (webhook delivery jobs), after ours, on the same
	// direct connection settings.
	if err := migrateRiver(ctx, db); err != nil {
		return fmt.Errorf("postgres: migrate job queue: %w", err)
	}
	return nil
}

// settingSource reads where a setting's value came from, on a connection
// of sqlDB.
func settingSource(ctx context.Context, sqlDB *sql.DB, name string) (string, error) {
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	var source string
	err = conn.Raw(func(driverConn any) error {
		var err error
		source, err = dbsqlc.New(driverConn.(*stdlib.Conn).Conn()).ServerSettingSource(ctx, name)
		return err
	})
	return source, err
}

// ErrReadOnly is Ready's answer when the database refuses writes: no
// writable primary is reachable (a standby, or a primary being demoted).
var ErrReadOnly = errors.New("database is read-only: no writable primary")

// Ready reports whether a writable primary answers and every migration is
// applied.
func (db *DB) Ready(ctx context.Context) error {
	readOnly, err := db.q.ServerTransactionReadOnly(ctx)
	if err != nil {
		return translate(err)
	}
	if readOnly == "on" {
		// Connections to a demoted primary: the next ones look for the new
		// one (target_session_attrs=read-write).
		db.Pool.Reset()
		return ErrReadOnly
	}
	p, closeDB, err := newGoose(db)
	if err != nil {
		return err
	}
	defer closeDB()
	// goose reads through database/sql, where no set_config travels with
	// the statement: the statement timeout bounds it as a deadline.
	if ms, err := strconv.ParseInt(db.timeouts["statement_timeout"], 10, 64); err == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		defer cancel()
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return err
	}
	if pending {
		return errors.New("migrations pending")
	}
	return nil
}

// NextXid is the xid8 the next transaction would get.
func (db *DB) NextXid(ctx context.Context) (uint64, error) {
	s, err := db.q.ServerNextXid(ctx)
	if err != nil {
		return 0, translate(err)
	}
	return strconv.ParseUint(s, 10, 64)
}

// OldestXid is the oldest xid8 of a transaction still running on the
// server: every transaction below it has ended.
func (db *DB) OldestXid(ctx context.Context) (uint64, error) {
	s, err := db.q.ServerOldestXid(ctx)
	if err != nil {
		return 0, translate(err)
	}
	return strconv.ParseUint(s, 10, 64)
}

// withTx runs fn in a pipelined transaction (pipeTx) begun by db.begin.
//
// The isolation level is set, never inherited from the server: the money
// path locks a row and then relies on reading its latest committed version,
// which READ COMMITTED gives and REPEATABLE READ does not (there a lock on a
// row changed since the snapshot fails, and a plain read sees the old row).
// A server default of REPEATABLE READ once left paid payments in processing.
func withTx(ctx context.Context, db *DB, fn func(pgx.Tx) error) (err error) {
	// Only inside a traced unit of work: the background passes' own
	// transactions would otherwise each start a trace of one span.
	if db.tracer != nil && trace.SpanContextFromContext(ctx).IsValid() {
		var span trace.Span
		ctx, span = db.tracer.Start(ctx, "db.transaction", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(semconv.DBSystemNamePostgreSQL))
		defer func() {
			if err != nil {
				span.SetStatus(codes.Error, "transaction failed")
			}
			span.End()
		}()
	}
	unsent, err := withTxOnce(ctx, db, fn)
	if unsent {
		// A pooled connection that broke while idle: the server never saw
		// the transaction, so it runs once more on another connection.
		_, err = withTxOnce(ctx, db, fn)
	}
	return err
}

// withTxOnce is one try of withTx; unsent says the server never saw it.
func withTxOnce(ctx context.Context, db *DB, fn func(pgx.Tx) error) (unsent bool, err error) {
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return false, translate(err)
	}
	defer conn.Release()
	tx := newPipeTx(conn.Conn(), db.begin)
	// Unconditional, so that a panic in fn also ends the transaction and
	// returns its connection: a leaked one keeps its locks and makes
	// pool.Close wait for ever. After Commit it is a no-op (pgx.ErrTxClosed).
	// The caller's cancellation must not stop the rollback.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return tx.unsent, err
	}
	if err := tx.Commit(ctx); err != nil {
		return tx.unsent, translate(err)
	}
	if tx.begun {
		// A transaction that ran nothing never reached the server.
		db.health.wrote(time.Now())
	}
	return false, nil
}

// Unique constraints the domain cares about, by name.
const (
	constraintLiveOrder     = "payments_one_live_per_order"
	constraintPaymentNumber = "payments_account_id_order_id_attempt_key"
	constraintAttemptNumber = "attempts_account_id_order_id_operation_number_key"
	constraintSecretHMAC    = "accounts_stripe_secret_hmac_key"
	constraintStripeAccount = "accounts_stripe_account_id_key"
	constraintMercadoPago   = "accounts_mercadopago_access_token_hmac_key"
)

// ErrUnavailable wraps failures to reach the database; it is a
// payment.ErrUnavailable, which is all the api needs to know.
var ErrUnavailable = fmt.Errorf("database %w", payment.ErrUnavailable)

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
			case constraintSecretHMAC, constraintStripeAccount, constraintMercadoPago:
				return account.ErrCredentialsInUse
			}
		}
		// Connection exceptions, a server shutting down or starting,
		// transient conflicts, and the session timeouts (lock_not_available,
		// query_canceled, idle_in_transaction_session_timeout: another
		// session held a lock too long, or this one stalled): the caller
		// may retry with the same key.
		// read_only_sql_transaction (25006): a primary demoted by a
		// failover; the pool is moving to the new one.
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), pgErr.Code == "57P01", pgErr.Code == "57P02",
			pgErr.Code == "57P03", pgErr.Code == "40001", pgErr.Code == "40P01", pgErr.Code == "25006",
			pgErr.Code == "55P03", pgErr.Code == "57014", pgErr.Code == "25P03":
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

// MigrationState is one migration as the database knows it.
type MigrationState struct {
	Version   int64
	Source    string // the file name; "" when this binary does not carry it
	Applied   bool
	AppliedAt time.Time
}

// MigrationStatus lists every migration this binary carries, applied or
// pending, then, when a newer release migrated the database further, the
// newest version applied (Source "", AppliedAt zero: this binary knows
// neither). It takes no lock (docs/upgrading.md).
func MigrationStatus(ctx context.Context, db *DB) ([]MigrationState, error) {
	p, closeDB, err := newGoose(db)
	if err != nil {
		return nil, err
	}
	defer closeDB()
	all, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: migration status: %w", err)
	}
	var out []MigrationState
	var known int64
	for _, m := range all {
		s := MigrationState{Version: m.Source.Version, Source: path.Base(m.Source.Path)}
		if m.State == goose.StateApplied {
			s.Applied, s.AppliedAt = true, m.AppliedAt
		}
		out = append(out, s)
		known = max(known, m.Source.Version)
	}
	newest, err := p.GetDBVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: migration status: %w", err)
	}
	if newest > known {
		// goose records when, not which file: the time is unknown here.
		out = append(out, MigrationState{Version: newest, Applied: true})
	}
	return out, nil
}
