package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// bounded runs statements outside a transaction, each preceded by set, the
// session timeouts as set_config(..., true), in one pipeline with one
// Sync: PostgreSQL runs the two in one implicit transaction, so the
// timeouts bound the statement and end with it, and the connection (a
// pooler's server connection) keeps nothing. With no timeouts (set == "")
// it is the pool itself.
type bounded struct {
	pool *pgxpool.Pool
	set  string
}

var _ interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
} = bounded{}

// send sends set and sql in one batch and reads set's answer; the caller
// reads sql's and closes the batch, which releases the connection.
func (b bounded) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	br, err := b.sendOnce(ctx, sql, args)
	if err != nil && pgconn.SafeToRetry(err) {
		// A pooled connection that broke while idle: nothing was written,
		// so the statement goes once more on another connection (in a new
		// batch: pgx keeps state in a sent one).
		br, err = b.sendOnce(ctx, sql, args)
	}
	return br, err
}

func (b bounded) sendOnce(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	batch := &pgx.Batch{}
	batch.Queue(b.set)
	batch.Queue(sql, args...)
	br := b.pool.SendBatch(ctx, batch)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

func (b bounded) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if b.set == "" {
		return b.pool.Exec(ctx, sql, args...)
	}
	br, err := b.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return execBatch(br)
}

func (b bounded) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if b.set == "" {
		return b.pool.Query(ctx, sql, args...)
	}
	br, err := b.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	return queryBatch(br)
}

func (b bounded) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if b.set == "" {
		return b.pool.QueryRow(ctx, sql, args...)
	}
	rows, err := b.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return (*batchRow)(rows.(*batchRows))
}
