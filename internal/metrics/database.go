package metrics

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/prometheus/client_golang/prometheus"
)

// DatabaseRefreshInterval is how often serve reads the database-derived
// gauges: about one scrape interval, so a scrape never waits on the
// database and sees values at most this old while the database answers.
const DatabaseRefreshInterval = 15 * time.Second

// refreshTimeout bounds one read: a stalled database must not pile up
// refreshes.
const refreshTimeout = 5 * time.Second

// databaseGauges holds the last values read from the database and exposes
// them with their age. A scrape only reads memory: while PostgreSQL is
// down /metrics still answers, with the process series, the last known
// values and their growing age.
type databaseGauges struct {
	statuses StatusCounter
	backlog  Backlog
	lag      FeedLag
	started  time.Time

	// openDiscrepancies is set by CountOpenDiscrepancies; nil leaves the
	// gauge out.
	openDiscrepancies func(ctx context.Context) (int64, error)

	byStatus, unread, backlogAge, feedLag, lastRefresh, age, discrepancies *prometheus.Desc
	failures                                                               prometheus.Counter

	mu        sync.Mutex
	counts    map[string]int64 // nil until read
	haveQueue bool
	queue     int64
	queueAge  time.Duration
	haveLag   bool
	lagNow    time.Duration
	refreshed time.Time // last refresh in which every read succeeded
	haveOpen  bool
	open      int64
}

func newDatabaseGauges(statuses StatusCounter, backlog Backlog, lag FeedLag) *databaseGauges {
	return &databaseGauges{
		statuses: statuses, backlog: backlog, lag: lag, started: time.Now(),
		byStatus: prometheus.NewDesc("payments_by_status", "Payments by current status, as of the last database refresh.", []string{"status"}, nil),
		unread:   prometheus.NewDesc("payments_events_backlog", "Events no consumer has fetched yet (after the last cursor passed back), as of the last database refresh.", nil, nil),
		discrepancies: prometheus.NewDesc("payments_discrepancies_open",
			"Open discrepancies between final payments and the provider (CONTRACT §14), as of the last database refresh.", nil, nil),
		backlogAge: prometheus.NewDesc("payments_events_backlog_age_seconds", "Age of the oldest event no consumer has fetched yet, as of the last database refresh.", nil, nil),
		feedLag: prometheus.NewDesc("payments_events_feed_lag_seconds",
			"How long the events feed may lag commits: age of the oldest transaction holding its horizon back, as of the last database refresh.", nil, nil),
		lastRefresh: prometheus.NewDesc("payments_database_gauges_refreshed_timestamp_seconds",
			"Unix time of the last refresh in which every database-derived gauge was read (0: none yet).", nil, nil),
		age: prometheus.NewDesc("payments_database_gauges_age_seconds",
			"Seconds since the database-derived gauges were last read (since start if never).", nil, nil),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payments_database_gauges_refresh_failures_total", Help: "Refreshes of the database-derived gauges that failed.",
		}),
	}
}

func (g *databaseGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.byStatus
	ch <- g.unread
	ch <- g.backlogAge
	ch <- g.discrepancies
	ch <- g.feedLag
	ch <- g.lastRefresh
	ch <- g.age
	g.failures.Describe(ch)
}

func (g *databaseGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.counts != nil {
		for _, s := range []payment.Status{payment.StatusProcessing, payment.StatusUnknown, payment.StatusRequiresAction, payment.StatusPending, payment.StatusAuthorized,
			payment.StatusCaptured, payment.StatusDeclined, payment.StatusFailed, payment.StatusCanceled} {
			ch <- prometheus.MustNewConstMetric(g.byStatus, prometheus.GaugeValue, float64(g.counts[string(s)]), string(s))
		}
	}
	if g.haveQueue {
		ch <- prometheus.MustNewConstMetric(g.unread, prometheus.GaugeValue, float64(g.queue))
		ch <- prometheus.MustNewConstMetric(g.backlogAge, prometheus.GaugeValue, g.queueAge.Seconds())
	}
	if g.haveOpen {
		ch <- prometheus.MustNewConstMetric(g.discrepancies, prometheus.GaugeValue, float64(g.open))
	}
	if g.haveLag {
		ch <- prometheus.MustNewConstMetric(g.feedLag, prometheus.GaugeValue, g.lagNow.Seconds())
	}
	last, since := 0.0, g.started
	if !g.refreshed.IsZero() {
		last, since = float64(g.refreshed.UnixNano())/1e9, g.refreshed
	}
	ch <- prometheus.MustNewConstMetric(g.lastRefresh, prometheus.GaugeValue, last)
	ch <- prometheus.MustNewConstMetric(g.age, prometheus.GaugeValue, time.Since(since).Seconds())
	g.failures.Collect(ch)
}

// refresh reads every source; a failed one keeps its last values.
func (g *databaseGauges) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	var errs []error
	if g.statuses != nil {
		counts, err := g.statuses(ctx)
		if err == nil {
			g.mu.Lock()
			g.counts = counts
			g.mu.Unlock()
		}
		errs = append(errs, err)
	}
	if g.backlog != nil {
		n, age, err := g.backlog(ctx)
		if err == nil {
			g.mu.Lock()
			g.haveQueue, g.queue, g.queueAge = true, n, age
			g.mu.Unlock()
		}
		errs = append(errs, err)
	}
	if g.lag != nil {
		lag, err := g.lag(ctx)
		if err == nil {
			g.mu.Lock()
			g.haveLag, g.lagNow = true, lag
			g.mu.Unlock()
		}
		errs = append(errs, err)
	}
	g.mu.Lock()
	open := g.openDiscrepancies
	g.mu.Unlock()
	if open != nil {
		n, err := open(ctx)
		if err == nil {
			g.mu.Lock()
			g.haveOpen, g.open = true, n
			g.mu.Unlock()
		}
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	if err != nil {
		g.failures.Inc()
		return err
	}
	g.mu.Lock()
	g.refreshed = time.Now()
	g.mu.Unlock()
	return nil
}

// CountOpenDiscrepancies adds payments_discrepancies_open to the
// database-derived gauges, read by count at every refresh.
func (m *Metrics) CountOpenDiscrepancies(count func(ctx context.Context) (int64, error)) {
	m.db.mu.Lock()
	defer m.db.mu.Unlock()
	m.db.openDiscrepancies = count
}

// RefreshDatabase reads the database-derived gauges now.
func (m *Metrics) RefreshDatabase(ctx context.Context) error { return m.db.refresh(ctx) }

// RunDatabaseRefresh refreshes the database-derived gauges at once and then
// every interval until ctx ends. A failure is logged and retried at the
// next tick; the gauges keep their last values and their age grows.
func (m *Metrics) RunDatabaseRefresh(ctx context.Context, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := m.RefreshDatabase(ctx); err != nil && ctx.Err() == nil && log != nil {
			log.WarnContext(ctx, "metrics: database gauges not refreshed", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
