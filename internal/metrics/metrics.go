// Package metrics holds the Prometheus collectors of the service.
package metrics

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/acmepay/payments/internal/buildinfo"
	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// StatusCounter counts payments by status; RefreshDatabase reads it.
type StatusCounter func(ctx context.Context) (map[string]int64, error)

// Backlog reports the events the feed's active consumers have not fetched
// yet and the age of the oldest; RefreshDatabase reads it.
type Backlog func(ctx context.Context) (unread int64, oldest time.Duration, err error)

// FeedLag reports how long the events feed may lag commits: the age of the
// oldest transaction holding its horizon back; RefreshDatabase reads it.
type FeedLag func(ctx context.Context) (time.Duration, error)

// Metrics implements payment.Metrics and the HTTP instrumentation.
type Metrics struct {
	Registry    *prometheus.Registry
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	idem        *prometheus.CounterVec
	provCalls   *prometheus.CounterVec
	provLatency *prometheus.HistogramVec
	transitions *prometheus.CounterVec
	reconRuns   prometheus.Counter
	reconSeen   *prometheus.CounterVec
	reconLeft   *prometheus.GaugeVec
	reconAlert  *prometheus.GaugeVec
	reconDone   *prometheus.CounterVec
	webhooks    *prometheus.CounterVec
	deliveries  *prometheus.CounterVec
	db          *databaseGauges
	circuits    *prometheus.GaugeVec
	// series holds each HTTP label set's children once looked up: every
	// request counts, and the sets are few (routes, methods and statuses
	// are fixed sets), so the vectors' label hashing runs once per set.
	series sync.Map // requestLabels → requestSeries
}

type requestLabels struct {
	route, method string
	status        int
}

type requestSeries struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

var _ payment.Metrics = (*Metrics)(nil)

// Providers are the values of the provider label; every other name is
// counted as OtherProvider, so the label's values stay a fixed set.
var Providers = []string{payment.ProviderStripe, payment.ProviderMercadoPago}

// OtherProvider is the provider label of a name outside Providers.
const OtherProvider = "other"

// providerLabel maps a provider name onto the label's fixed set.
func providerLabel(name string) string {
	if slices.Contains(Providers, name) {
		return name
	}
	return OtherProvider
}

// New registers every collector on a fresh registry. statuses, backlog and
// lag may be nil; they are read by RefreshDatabase, never by a scrape, so
// /metrics answers whatever state the database is in.
func New(statuses StatusCounter, backlog Backlog, lag FeedLag) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "payments_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}, []string{"route"}),
		idem: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_idempotency_outcomes_total",
			Help: "Idempotency decisions by operation and outcome (new, replayed, in_use, reused, recovered, conflict).",
		}, []string{"operation", "outcome"}),
		provCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_provider_calls_total", Help: "Provider calls by provider, operation and classified outcome.",
		}, []string{"provider", "operation", "outcome"}),
		provLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "payments_provider_call_duration_seconds", Help: "Provider call latency by provider and operation.",
			Buckets: prometheus.DefBuckets,
		}, []string{"provider", "operation"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_status_transitions_total", Help: "Payment status transitions, by the payment's provider.",
		}, []string{"provider", "from", "to"}),
		reconRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payments_reconciler_runs_total", Help: "Reconciliation passes (each covers every provider).",
		}),
		reconSeen: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_reconciler_examined_total", Help: "Attempts examined by the reconciler, by provider.",
		}, []string{"provider"}),
		reconLeft: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "payments_reconciler_still_unknown", Help: "Attempts the last pass could not resolve, by provider.",
		}, []string{"provider"}),
		reconAlert: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "payments_reconciler_attempts_needing_attention",
			Help: "Attempts unresolved for longer than RECONCILE_ALERT_AFTER, by provider, as of the last pass.",
		}, []string{"provider"}),
		reconDone: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_reconciler_resolutions_total", Help: "Attempts resolved by the reconciler, by provider and resulting status.",
		}, []string{"provider", "status"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_webhook_deliveries_total", Help: "Provider webhook deliveries by provider and outcome (applied, duplicate, ignored, unknown_object, rejected).",
		}, []string{"provider", "outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_webhook_endpoint_deliveries_total",
			Help: "Attempts to deliver an event to a merchant's webhook endpoint, by outcome (succeeded, retrying, failed, refused, canceled).",
		}, []string{"outcome"}),
	}
	m.Registry.MustRegister(m.requests, m.latency, m.idem, m.provCalls, m.provLatency, m.transitions,
		m.reconRuns, m.reconSeen, m.reconLeft, m.reconAlert, m.reconDone, m.webhooks, m.deliveries,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.circuits = newCircuitGauge()
	m.Registry.MustRegister(m.circuits, newBuildInfo(buildinfo.Get()))
	m.initKnownSeries()
	m.db = newDatabaseGauges(statuses, backlog, lag)
	m.Registry.MustRegister(m.db)
	return m
}

// initKnownSeries creates every series of a known label value at 0:
// Prometheus cannot see the first increase of a series that does not exist
// yet, so the first rejected webhook or failed resolution of a process would
// be lost to rate() and increase().
func (m *Metrics) initKnownSeries() {
	for _, op := range []string{idempotency.OpPaymentsCreate, idempotency.OpPaymentsCapture,
		idempotency.OpPaymentsCancel, idempotency.OpRefundsCreate, idempotency.OpAdminReplay} {
		for _, outcome := range []string{"new", "replayed", "in_use", "reused", "recovered"} {
			m.idem.WithLabelValues(op, outcome)
		}
	}
	m.idem.WithLabelValues(idempotency.OpPaymentsCreate, "conflict")
	for _, prov := range Providers {
		m.initProviderSeries(prov)
	}
	for _, outcome := range DeliveryOutcomes {
		m.deliveries.WithLabelValues(outcome)
	}
}

// initProviderSeries creates one provider's series of known label values.
func (m *Metrics) initProviderSeries(prov string) {
	for _, op := range []payment.Operation{payment.OpAuthorize, payment.OpCapture, payment.OpCancel, payment.OpRefund} {
		for _, outcome := range []provider.Outcome{provider.Succeeded, provider.Declined, provider.Failed, provider.Unknown} {
			m.provCalls.WithLabelValues(prov, string(op), string(outcome))
		}
		m.provLatency.WithLabelValues(prov, string(op))
	}
	for _, status := range []string{string(payment.StatusRequiresAction), string(payment.StatusPending), string(payment.StatusAuthorized), string(payment.StatusCaptured),
		string(payment.StatusDeclined), string(payment.StatusFailed), string(payment.StatusCanceled), "refunded", "refund_failed"} {
		m.reconDone.WithLabelValues(prov, status)
	}
	for _, outcome := range []string{inbound.Applied, inbound.Duplicate, inbound.Ignored,
		inbound.UnknownObject, "rejected"} {
		m.webhooks.WithLabelValues(prov, outcome)
	}
	m.reconSeen.WithLabelValues(prov)
	m.reconLeft.WithLabelValues(prov)
	m.reconAlert.WithLabelValues(prov)
}

// Request counts one HTTP request.
func (m *Metrics) Request(route, method string, status int, d time.Duration) {
	l := requestLabels{route: route, method: method, status: status}
	s, ok := m.series.Load(l)
	if !ok {
		s, _ = m.series.LoadOrStore(l, requestSeries{
			count:   m.requests.WithLabelValues(route, method, strconv.Itoa(status)),
			latency: m.latency.WithLabelValues(route),
		})
	}
	rs := s.(requestSeries)
	rs.count.Inc()
	rs.latency.Observe(d.Seconds())
}

// Idempotency counts one idempotency decision.
func (m *Metrics) Idempotency(operation, outcome string) {
	m.idem.WithLabelValues(operation, outcome).Inc()
}

// ProviderCall counts one call to a provider.
func (m *Metrics) ProviderCall(prov string, op payment.Operation, outcome provider.Outcome, d time.Duration) {
	prov = providerLabel(prov)
	m.provCalls.WithLabelValues(prov, string(op), string(outcome)).Inc()
	m.provLatency.WithLabelValues(prov, string(op)).Observe(d.Seconds())
}

// PaymentTransition counts one status change of a payment at a provider.
func (m *Metrics) PaymentTransition(prov string, from, to payment.Status) {
	m.transitions.WithLabelValues(providerLabel(prov), string(from), string(to)).Inc()
}

// ReconcileRun counts one reconciliation pass and what it examined and
// left unresolved, by provider; a provider absent from stillUnknown had
// none left.
func (m *Metrics) ReconcileRun(examined, stillUnknown map[string]int) {
	m.reconRuns.Inc()
	for prov, n := range examined {
		m.reconSeen.WithLabelValues(providerLabel(prov)).Add(float64(n))
	}
	m.setByProvider(m.reconLeft, stillUnknown)
}

// ReconcileNeedsAttention sets the attempts unresolved past
// RECONCILE_ALERT_AFTER, by provider.
func (m *Metrics) ReconcileNeedsAttention(byProvider map[string]int) {
	m.setByProvider(m.reconAlert, byProvider)
}

// setByProvider sets a gauge of every provider label at once: 0 for those
// absent from counts, the sum for names counted as other.
func (m *Metrics) setByProvider(g *prometheus.GaugeVec, counts map[string]int) {
	sums := map[string]int{}
	for prov, n := range counts {
		sums[providerLabel(prov)] += n
	}
	for _, prov := range Providers {
		g.WithLabelValues(prov).Set(float64(sums[prov]))
	}
	if n, ok := sums[OtherProvider]; ok {
		g.WithLabelValues(OtherProvider).Set(float64(n))
	} else {
		g.DeleteLabelValues(OtherProvider)
	}
}

// ReconcileResolution counts one attempt at a provider resolved by the
// reconciler.
func (m *Metrics) ReconcileResolution(prov, status string) {
	m.reconDone.WithLabelValues(providerLabel(prov), status).Inc()
}

// Webhook counts one delivery of a provider's webhook.
func (m *Metrics) Webhook(prov, outcome string) {
	m.webhooks.WithLabelValues(providerLabel(prov), outcome).Inc()
}

// DeliveryOutcomes are the outcomes of payments_webhook_endpoint_deliveries_total:
// succeeded (a 2xx), retrying (failed, another attempt follows), failed
// (the last attempt failed: the delivery is given up), refused (the URL
// resolved to a non-public address at delivery time; not counted as
// retrying or failed), canceled (the endpoint was disabled or deleted
// before the attempt).
var DeliveryOutcomes = []string{"succeeded", "retrying", "failed", "refused", "canceled"}

// WebhookEndpointDelivery counts one attempt to deliver to a merchant's
// endpoint.
func (m *Metrics) WebhookEndpointDelivery(outcome string) {
	m.deliveries.WithLabelValues(outcome).Inc()
}
