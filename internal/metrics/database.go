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
	// webhookDeliveries is set by WatchWebhookDeliveries; nil leaves its
	// gauges out.
	webhookDeliveries func(ctx context.Context) (WebhookDeliveryState, error)

	byStatus, unread, backlogAge, feedLag, lastRefresh, age, discrepancies *prometheus.Desc
	pendingAge, endpointPendingAge, endpointsDisabled                      *prometheus.Desc
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
	haveHooks bool
	hooks     WebhookDeliveryState
}

func newDatabaseGauges(statuses StatusCounter, backlog Backlog, lag FeedLag) *databaseGauges {
	return &databaseGauges{
		statuses: statuses, backlog: backlog, lag: lag, started: time.Now(),
		byStatus: prometheus.NewDesc("payments_by_status", "Payments by current status, as of the last database refresh.", []string{"status"}, nil),
		unread:   prometheus.NewDesc("payments_events_backlog", "Events not yet fetched (after the last cursor passed back) by the accounts whose consumer moved its cursor in the last 7 days, as of the last database refresh.", nil, nil),
		discrepancies: prometheus.NewDesc("payments_discrepancies_open",
			"Open discrepancies between final payments and the provider, as of the last database refresh.", nil, nil),
		backlogAge: prometheus.NewDesc("payments_events_backlog_age_seconds", "Age of the oldest event counted in payments_events_backlog, as of the last database refresh.", nil, nil),
		feedLag: prometheus.NewDesc("payments_events_feed_lag_seconds",
			"How long the events feed may lag commits: age of the oldest transaction holding its horizon back, as of the last database refresh.", nil, nil),
		lastRefresh: prometheus.NewDesc("payments_database_gauges_refreshed_timestamp_seconds",
			"Unix time of the last refresh in which every database-derived gauge was read (0: none yet).", nil, nil),
		age: prometheus.NewDesc("payments_database_gauges_age_seconds",
			"Seconds since the database-derived gauges were last read (since start if never).", nil, nil),
		pendingAge: prometheus.NewDesc("payments_webhook_endpoint_oldest_pending_age_seconds",
			"Age of the oldest delivery to an enabled webhook endpoint not yet done (0: none), as of the last database refresh.", nil, nil),
		endpointPendingAge: prometheus.NewDesc("payments_webhook_endpoint_oldest_pending_age_by_endpoint_seconds",
			"Age of the oldest delivery not yet done, for the enabled endpoints furthest behind (at most 10 series), as of the last database refresh.",
			[]string{"endpoint_id"}, nil),
		endpointsDisabled: prometheus.NewDesc("payments_webhook_endpoints_disabled",
			"Webhook endpoints disabled and not deleted, by reason (failing: disabled while its deliveries failed, as the service does after 5 days; merchant: disabled by the merchant), as of the last database refresh.",
			[]string{"reason"}, nil),
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
	ch <- g.pendingAge
	ch <- g.endpointPendingAge
	ch <- g.endpointsDisabled
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
	if g.haveHooks {
		ch <- prometheus.MustNewConstMetric(g.pendingAge, prometheus.GaugeValue, g.hooks.OldestPending.Seconds())
		for id, age := range g.hooks.ByEndpoint {
			ch <- prometheus.MustNewConstMetric(g.endpointPendingAge, prometheus.GaugeValue, age.Seconds(), id)
		}
		for _, reason := range []string{DisabledFailing, DisabledMerchant} {
			ch <- prometheus.MustNewConstMetric(g.endpointsDisabled, prometheus.GaugeValue, float64(g.hooks.Disabled[reason]), reason)
		}
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
	open, hooks := g.openDiscrepancies, g.webhookDeliveries
	g.mu.Unlock()
	if hooks != nil {
		st, err := hooks(ctx)
		if err == nil {
			g.mu.Lock()
			g.haveHooks, g.hooks = true, st
			g.mu.Unlock()
		}
		errs = append(errs, err)
	}
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

// Reasons of payments_webhook_endpoints_disabled.
const (
	DisabledFailing  = "failing"
	DisabledMerchant = "merchant"
)

// MaxEndpointSeries bounds the per-endpoint series of the pending age:
// only the endpoints furthest behind get one, so the series stay few
// however many endpoints merchants create; the unlabelled maximum covers
// the rest.
const MaxEndpointSeries = 10

// WebhookDeliveryState is what the database says of the deliveries to
// merchants' webhook endpoints.
type WebhookDeliveryState struct {
	// OldestPending is the age of the oldest delivery to an enabled
	// endpoint not yet done (0: none).
	OldestPending time.Duration
	// ByEndpoint is that age for at most MaxEndpointSeries enabled
	// endpoints, those furthest behind.
	ByEndpoint map[string]time.Duration
	// Disabled counts the endpoints disabled and not deleted, by reason.
	Disabled map[string]int64
}

// WatchWebhookDeliveries adds the gauges of outbound webhook deliveries
// to the database-derived gauges, read by read at every refresh.
func (m *Metrics) WatchWebhookDeliveries(read func(ctx context.Context) (WebhookDeliveryState, error)) {
	m.db.mu.Lock()
	defer m.db.mu.Unlock()
	m.db.webhookDeliveries = read
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
