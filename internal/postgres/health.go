package postgres

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// health watches the pool's connections for a failover: connections that
// could not be made or were lost, a server that turned read-only (a
// demoted primary), and the last transaction committed.
type health struct {
	pool          atomic.Pointer[pgxpool.Pool]
	connectErrors atomic.Int64
	lost          atomic.Int64
	readOnly      atomic.Int64
	lastWrite     atomic.Int64 // unix nanoseconds; 0 before the first
}

// TraceConnectStart implements pgx.ConnectTracer.
func (h *health) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return ctx
}

// TraceConnectEnd implements pgx.ConnectTracer.
func (h *health) TraceConnectEnd(_ context.Context, d pgx.TraceConnectEndData) {
	if d.Err != nil {
		h.connectErrors.Add(1)
	}
}

// TraceQueryStart implements pgx.QueryTracer.
func (h *health) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer. A server that refuses writes
// (25006) or shuts down (57P01-57P03) is being failed over: every pooled
// connection to it is dropped, so that the next ones go, through
// target_session_attrs=read-write, to the new primary.
func (h *health) TraceQueryEnd(_ context.Context, conn *pgx.Conn, d pgx.TraceQueryEndData) {
	h.failed(conn, d.Err)
}

// TraceBatchEnd implements pgx.BatchTracer: a batch fails over as one
// query, on its first error.
func (h *health) TraceBatchEnd(_ context.Context, conn *pgx.Conn, d pgx.TraceBatchEndData) {
	h.failed(conn, d.Err)
}

func (h *health) failed(conn *pgx.Conn, err error) {
	if err == nil {
		return
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		switch {
		case pgErr.Code == "25006":
			h.readOnly.Add(1)
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", strings.HasPrefix(pgErr.Code, "08"):
			h.lost.Add(1)
		default:
			// A statement's own failure, or a session ended for idling in
			// its transaction: the server is fine.
			return
		}
	case conn.IsClosed() && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		h.lost.Add(1) // the network or the server went away
	default:
		return
	}
	if p := h.pool.Load(); p != nil {
		p.Reset()
	}
}

func (h *health) wrote(at time.Time) { h.lastWrite.Store(at.UnixNano()) }

// tracers runs each pgx tracer of the pool in turn: the health watch and
// any tracer an Option set (WithCounter).
type tracers struct {
	health *health
	other  pgx.QueryTracer
}

func (t tracers) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if t.other != nil {
		ctx = t.other.TraceQueryStart(ctx, c, d)
	}
	return t.health.TraceQueryStart(ctx, c, d)
}

func (t tracers) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	if t.other != nil {
		t.other.TraceQueryEnd(ctx, c, d)
	}
	t.health.TraceQueryEnd(ctx, c, d)
}

func (t tracers) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if o, ok := t.other.(pgx.BatchTracer); ok {
		ctx = o.TraceBatchStart(ctx, c, d)
	}
	return ctx
}

func (t tracers) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	if o, ok := t.other.(pgx.BatchTracer); ok {
		o.TraceBatchQuery(ctx, c, d)
	}
}

func (t tracers) TraceBatchEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchEndData) {
	if o, ok := t.other.(pgx.BatchTracer); ok {
		o.TraceBatchEnd(ctx, c, d)
	}
	t.health.TraceBatchEnd(ctx, c, d)
}

func (t tracers) TraceConnectStart(ctx context.Context, d pgx.TraceConnectStartData) context.Context {
	return t.health.TraceConnectStart(ctx, d)
}

func (t tracers) TraceConnectEnd(ctx context.Context, d pgx.TraceConnectEndData) {
	t.health.TraceConnectEnd(ctx, d)
}

// Collector returns the pool's Prometheus metrics: waits for a free
// connection, connections by state, connection errors and the time since
// the last committed transaction.
func (db *DB) Collector() prometheus.Collector { return &poolCollector{db: db} }

var (
	descAcquireWaits = prometheus.NewDesc("payments_db_pool_acquire_waits_total",
		"Acquisitions of a database connection that had to wait because none was free.", nil, nil)
	descAcquireWaitSeconds = prometheus.NewDesc("payments_db_pool_acquire_wait_seconds_total",
		"Time spent waiting for a free database connection.", nil, nil)
	descConns = prometheus.NewDesc("payments_db_pool_connections",
		"Database connections of the pool by state.", []string{"state"}, nil)
	descMaxConns = prometheus.NewDesc("payments_db_pool_max_connections",
		"The pool's maximum number of database connections.", nil, nil)
	descConnErrors = prometheus.NewDesc("payments_db_connection_errors_total",
		"Database connection errors: connect (could not connect to a writable primary), lost (a connection broke "+
			"or the server shut down), read_only (the server refused a write: a demoted primary).", []string{"kind"}, nil)
	descSinceWrite = prometheus.NewDesc("payments_db_seconds_since_last_write",
		"Seconds since this instance last committed a transaction; -1 before the first.", nil, nil)
)

type poolCollector struct{ db *DB }

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAcquireWaits, descAcquireWaitSeconds, descConns, descMaxConns, descConnErrors, descSinceWrite} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.db.Pool.Stat()
	h := c.db.health
	ch <- prometheus.MustNewConstMetric(descAcquireWaits, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(descAcquireWaitSeconds, prometheus.CounterValue, s.EmptyAcquireWaitTime().Seconds())
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(s.AcquiredConns()), "in_use")
	ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(s.ConstructingConns()), "connecting")
	ch <- prometheus.MustNewConstMetric(descMaxConns, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(descConnErrors, prometheus.CounterValue, float64(h.connectErrors.Load()), "connect")
	ch <- prometheus.MustNewConstMetric(descConnErrors, prometheus.CounterValue, float64(h.lost.Load()), "lost")
	ch <- prometheus.MustNewConstMetric(descConnErrors, prometheus.CounterValue, float64(h.readOnly.Load()), "read_only")
	since := -1.0
	if ns := h.lastWrite.Load(); ns != 0 {
		since = time.Since(time.Unix(0, ns)).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(descSinceWrite, prometheus.GaugeValue, since)
}
