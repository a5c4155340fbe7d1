package postgres

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Counter counts the work sent to the database: transactions begun,
// statements run (a statement outside a transaction is its own) and round
// trips (a query, a BEGIN, a COMMIT, or a whole pipelined batch). Benchmarks
// and cost tests use it to hold the money path to its budget.
type Counter struct {
	txs, statements, roundTrips atomic.Int64
}

// Counts returns transactions begun and statements other than
// begin/commit/rollback.
func (c *Counter) Counts() (txs, statements int64) { return c.txs.Load(), c.statements.Load() }

// RoundTrips returns the round trips so far.
func (c *Counter) RoundTrips() int64 { return c.roundTrips.Load() }

func (c *Counter) statement(sql string) {
	switch sql := strings.ToLower(strings.TrimSpace(sql)); {
	case strings.HasPrefix(sql, "begin"):
		c.txs.Add(1)
	case sql == "commit", sql == "rollback", strings.HasPrefix(sql, strings.ToLower(setTimeoutsPrefix)):
	default:
		c.statements.Add(1)
	}
}

// TraceQueryStart implements pgx.QueryTracer.
func (c *Counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.roundTrips.Add(1)
	c.statement(d.SQL)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer: a batch is one round trip,
// whatever it holds.
func (c *Counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.roundTrips.Add(1)
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *Counter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.statement(d.SQL)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *Counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
