package postgres

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Counter counts the work sent to the database: transactions begun,
// statements run (a statement outside a transaction is its own) and round
// trips (a query, a BEGIN, a COMMIT, or a whole pipelined batch). Benchmarks
// and cost tests use it to hold the money path to its budget.
type Counter struct {
	txs, statements, roundTrips atomic.Int64

	mu    sync.Mutex
	names []string
}

// Names returns the statements run since the last call, each by its sqlc
// name ("-- name: X") or, without one, its first words; "BEGIN" and
// "COMMIT" are listed too, so a cost test can name every statement.
func (c *Counter) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names
	c.names = nil
	return n
}

// statementName is a statement's sqlc name or its first three words.
func statementName(sql string) string {
	sql = strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(sql, "-- name: "); ok {
		if f := strings.Fields(rest); len(f) > 0 {
			return f[0]
		}
	}
	f := strings.Fields(sql)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}

// Counts returns transactions begun and statements other than
// begin/commit/rollback.
func (c *Counter) Counts() (txs, statements int64) { return c.txs.Load(), c.statements.Load() }

// RoundTrips returns the round trips so far.
func (c *Counter) RoundTrips() int64 { return c.roundTrips.Load() }

func (c *Counter) statement(sql string) {
	c.mu.Lock()
	c.names = append(c.names, statementName(sql))
	c.mu.Unlock()
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
