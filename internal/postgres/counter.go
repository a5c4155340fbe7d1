package postgres

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Counter counts round trips to the database: transactions begun and
// statements run (a statement outside a transaction is its own). Benchmarks
// and cost tests use it to hold the money path to its budget.
type Counter struct {
	txs, statements atomic.Int64
}

// Counts returns transactions begun and statements other than
// begin/commit/rollback.
func (c *Counter) Counts() (txs, statements int64) { return c.txs.Load(), c.statements.Load() }

// TraceQueryStart implements pgx.QueryTracer.
func (c *Counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	// A begin may carry its SET LOCALs (withTx): still one round trip.
	switch sql := strings.ToLower(strings.TrimSpace(d.SQL)); {
	case strings.HasPrefix(sql, "begin"):
		c.txs.Add(1)
	case sql == "commit", sql == "rollback":
	default:
		c.statements.Add(1)
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
