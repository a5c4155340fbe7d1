// Package metrics holds the Prometheus collectors of the service.
package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// StatusCounter counts payments by status; RefreshDatabase reads it.
type StatusCounter func(ctx context.Context) (map[string]int64, error)

// Backlog reports the events no consumer has fetched yet and the age of
// the oldest; RefreshDatabase reads it.
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
	reconSeen   prometheus.Counter
	reconLeft   prometheus.Gauge
	reconAlert  prometheus.Gauge
	reconDone   *prometheus.CounterVec
	webhooks    *prometheus.CounterVec
	deliveries  *prometheus.CounterVec
	db          *databaseGauges
	circuits    *prometheus.GaugeVec
}

var _ payment.Metrics = (*Metrics)(nil)

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
			Name: "payments_provider_calls_total", Help: "Provider calls by operation and classified outcome.",
		}, []string{"operation", "outcome"}),
		provLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "payments_provider_call_duration_seconds", Help: "Provider call latency by operation.",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_status_transitions_total", Help: "Payment status transitions.",
		}, []string{"from", "to"}),
		reconRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payments_reconciler_runs_total", Help: "Reconciliation passes.",
		}),
		reconSeen: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payments_reconciler_examined_total", Help: "Attempts examined by the reconciler.",
		}),
		reconLeft: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payments_reconciler_still_unknown", Help: "Attempts the last pass could not resolve.",
		}),
		reconAlert: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "payments_reconciler_attempts_needing_attention",
			Help: "Attempts unresolved for longer than RECONCILE_ALERT_AFTER, as of the last pass.",
		}),
		reconDone: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_reconciler_resolutions_total", Help: "Attempts resolved by the reconciler, by resulting status.",
		}, []string{"status"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_webhook_deliveries_total", Help: "Provider webhook deliveries by outcome (applied, duplicate, ignored, unknown_object, rejected).",
		}, []string{"outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_webhook_endpoint_deliveries_total",
			Help: "Attempts to deliver an event to a merchant's webhook endpoint, by outcome (succeeded, retrying, failed, refused, canceled).",
		}, []string{"outcome"}),
	}
	m.Registry.MustRegister(m.requests, m.latency, m.idem, m.provCalls, m.provLatency, m.transitions,
		m.reconRuns, m.reconSeen, m.reconLeft, m.reconAlert, m.reconDone, m.webhooks, m.deliveries,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.circuits = newCircuitGauge()
	m.Registry.MustRegister(m.circuits)
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
	for _, op := range []payment.Operation{payment.OpAuthorize, payment.OpCapture, payment.OpCancel, payment.OpRefund} {
		for _, outcome := range []provider.Outcome{provider.Succeeded, provider.Declined, provider.Failed, provider.Unknown} {
			m.provCalls.WithLabelValues(string(op), string(outcome))
		}
		m.provLatency.WithLabelValues(string(op))
	}
	for _, status := range []string{string(payment.StatusRequiresAction), string(payment.StatusPending), string(payment.StatusAuthorized), string(payment.StatusCaptured),
		string(payment.StatusDeclined), string(payment.StatusFailed), string(payment.StatusCanceled), "refunded", "refund_failed"} {
		m.reconDone.WithLabelValues(status)
	}
	for _, outcome := range []string{inbound.Applied, inbound.Duplicate, inbound.Ignored,
		inbound.UnknownObject, "rejected"} {
		m.webhooks.WithLabelValues(outcome)
	}
	for _, outcome := range DeliveryOutcomes {
		m.deliveries.WithLabelValues(outcome)
	}
}

// Request counts one HTTP request.
func (m *Metrics) Request(route, method string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

// Idempotency counts one idempotency decision.
func (m *Metrics) Idempotency(operation, outcome string) {
	m.idem.WithLabelValues(operation, outcome).Inc()
}

// ProviderCall counts one provider call.
func (m *Metrics) ProviderCall(op payment.Operation, outcome provider.Outcome, d time.Duration) {
	m.provCalls.WithLabelValues(string(op), string(outcome)).Inc()
	m.provLatency.WithLabelValues(string(op)).Observe(d.Seconds())
}

// PaymentTransition counts one status change.
func (m *Metrics) PaymentTransition(from, to payment.Status) {
	m.transitions.WithLabelValues(string(from), string(to)).Inc()
}

// ReconcileRun counts one reconciliation pass.
func (m *Metrics) ReconcileRun(examined, stillUnknown int) {
	m.reconRuns.Inc()
	m.reconSeen.Add(float64(examined))
	m.reconLeft.Set(float64(stillUnknown))
}

// ReconcileNeedsAttention sets the attempts unresolved past
// RECONCILE_ALERT_AFTER.
func (m *Metrics) ReconcileNeedsAttention(n int) { m.reconAlert.Set(float64(n)) }

// ReconcileResolution counts one attempt resolved by the reconciler.
func (m *Metrics) ReconcileResolution(status string) { m.reconDone.WithLabelValues(status).Inc() }

// Webhook counts one webhook delivery.
func (m *Metrics) Webhook(outcome string) { m.webhooks.WithLabelValues(outcome).Inc() }

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
