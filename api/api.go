// Package api is the HTTP surface: chi routes, middleware, handlers, and the
// one place where domain error codes become HTTP statuses and problem+json.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/authlimit"
	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/metrics"
	"github.com/acmepay/payments/internal/notify"
	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/reconcile"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"
)

// Readiness reports whether the service can take traffic.
type Readiness interface {
	Ready(ctx context.Context) error
}

// Config wires a Server.
type Config struct {
	Payments *payment.Service
	// Reconciler reconciles a payment for an operator.
	Reconciler *reconcile.Reconciler
	Accounts   *account.Service
	Ready      Readiness
	Metrics    *metrics.Metrics
	Logger     *slog.Logger
	// AdminToken enables /admin/v1; empty disables it (404).
	AdminToken string
	// AuthLimiter counts failed admin authentications per client address;
	// the console's sign-in must share it. Nil: one of this server's own.
	AuthLimiter *authlimit.Limiter
	// NoMetrics leaves /metrics out, when METRICS_ADDR serves it instead.
	NoMetrics bool
	// Console, when set, is served at /console/ (the operations console,
	// which exists only with an admin token).
	Console http.Handler
	// Operations serves the admin payments and /admin/v1/discrepancies.
	Operations *operations.Service
	// Webhooks serves /v1/webhook_endpoints and event deliveries; nil
	// leaves them out (404).
	Webhooks *notify.Service
	// Inbound takes the providers' events at /webhooks/stripe and
	// /webhooks/mercadopago.
	Inbound *inbound.Service
	// BodyBudget bounds the bytes of provider webhook bodies read at once,
	// across all requests; 0 is 16 MiB.
	BodyBudget int64
	// Tracer, when set, serves every request in a span; nil: no tracing.
	Tracer trace.TracerProvider
}

// Server serves the HTTP API.
type Server struct {
	payments    *payment.Service
	reconciler  *reconcile.Reconciler
	accounts    *account.Service
	ready       Readiness
	metrics     *metrics.Metrics
	log         *slog.Logger
	adminToken  string
	authLimiter *authlimit.Limiter
	noMetrics   bool
	console     http.Handler
	operations  *operations.Service
	webhooks    *notify.Service
	inbound     *inbound.Service
	bodies      *semaphore.Weighted
	tracer      trace.TracerProvider
}

// New checks every dependency.
func New(c Config) (*Server, error) {
	if c.Payments == nil || c.Reconciler == nil || c.Accounts == nil || c.Ready == nil || c.Metrics == nil || c.Logger == nil ||
		c.Operations == nil || c.Inbound == nil {
		return nil, errors.New("api: payments, reconciler, operations, inbound, accounts, readiness, metrics and logger are required")
	}
	if c.AuthLimiter == nil {
		c.AuthLimiter = authlimit.New(authlimit.Config{})
	}
	if c.BodyBudget <= 0 {
		c.BodyBudget = defaultBodyBudget
	}
	return &Server{payments: c.Payments, reconciler: c.Reconciler, accounts: c.Accounts, ready: c.Ready,
		metrics: c.Metrics, log: c.Logger, adminToken: c.AdminToken, authLimiter: c.AuthLimiter,
		noMetrics: c.NoMetrics, console: c.Console, operations: c.Operations, webhooks: c.Webhooks,
		inbound: c.Inbound, bodies: semaphore.NewWeighted(c.BodyBudget), tracer: c.Tracer}, nil
}

// Handler returns the routes with their middleware stack.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(requestID, traceRequests(s.tracer), accessLog(s.log, s.metrics), recoverPanic(s.log), rejectBadText(s.log))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, payment.Errorf(payment.CodeNotFound, "no such resource"))
	})
	var methods []string // filled in once every route is registered
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		path := req.URL.RawPath
		if path == "" {
			path = req.URL.Path
		}
		allowed := allowedMethods(r, methods, path)
		if len(allowed) == 0 {
			// chi answers an unknown method before it looks at the path.
			s.writeError(w, req, payment.Errorf(payment.CodeNotFound, "no such resource"))
			return
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		s.writeError(w, req, payment.Errorf(codeMethodNotAllowed, "method not allowed on this resource"))
	})

	// GetHead answers HEAD on every GET route as GET would, without the
	// body (net/http drops it and keeps the Content-Length).
	r.Use(middleware.GetHead)

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	if !s.noMetrics {
		r.Method(http.MethodGet, "/metrics", MetricsHandler(s.metrics))
	}

	// Every POST takes a body; identityBody refuses it compressed.
	r.Route("/v1", func(r chi.Router) {
		r.Use(authenticate(s.log, s.accounts))
		r.With(identityBody).Post("/payments", s.createPayment)
		r.Get("/payments", s.listPayments)
		r.Get("/payments/{id}", s.getPayment)
		r.With(identityBody).Post("/payments/{id}/capture", s.capturePayment)
		r.With(identityBody).Post("/payments/{id}/cancel", s.cancelPayment)
		r.With(identityBody).Post("/payments/{id}/refunds", s.createRefund)
		r.Get("/payments/{id}/refunds", s.listRefunds)
		r.Get("/refunds/{id}", s.getRefund)
		r.Get("/events", s.listEvents)
		if s.webhooks != nil {
			r.With(identityBody).Post("/webhook_endpoints", s.createWebhookEndpoint)
			r.Get("/webhook_endpoints", s.listWebhookEndpoints)
			r.Get("/webhook_endpoints/{id}", s.getWebhookEndpoint)
			r.With(identityBody).Patch("/webhook_endpoints/{id}", s.updateWebhookEndpoint)
			r.Delete("/webhook_endpoints/{id}", s.deleteWebhookEndpoint)
			r.With(identityBody).Post("/webhook_endpoints/{id}/rotate_secret", s.rotateWebhookSecret)
			r.Get("/webhook_endpoints/{id}/deliveries", s.listEndpointDeliveries)
			r.Get("/events/{id}/deliveries", s.listEventDeliveries)
			r.With(identityBody).Post("/events/{id}/redeliver", s.redeliverEvent)
		}
	})
	r.With(identityBody).Post("/webhooks/stripe/{account_id}", s.stripeWebhook)
	r.With(identityBody).Post("/webhooks/mercadopago/{account_id}", s.mercadoPagoWebhook)
	r.Route("/admin/v1", s.adminRoutes)
	if s.console != nil && s.adminToken != "" {
		r.Mount("/console", s.console)
	}
	methods = routedMethods(r)
	return r
}

// adminRoutes are the operators' API, behind the admin token.
func (s *Server) adminRoutes(r chi.Router) {
	r.Use(adminOnly(s.log, s.adminToken, s.authLimiter))
	r.With(identityBody).Post("/accounts", s.createAccount)
	r.With(identityBody).Put("/accounts/{id}/providers/{provider}", s.setAccountProvider)
	r.With(identityBody).Put("/accounts/{id}/routing", s.setAccountRouting)
	r.Get("/accounts/{id}/routing", s.getAccountRouting)
	r.Get("/payments", s.adminListPayments)
	r.Get("/payments/{id}", s.adminGetPayment)
	r.With(identityBody).Post("/payments/{id}/reconcile", s.adminReconcile)
	r.With(identityBody).Post("/payments/{id}/replay", s.adminReplay)
	r.Get("/discrepancies", s.adminListDiscrepancies)
	r.Get("/discrepancies/{id}", s.adminGetDiscrepancy)
	r.With(identityBody).Post("/discrepancies/{id}/resolve", s.adminResolveDiscrepancy)
	if s.webhooks != nil {
		r.Get("/webhook_endpoints", s.adminListWebhookEndpoints)
		r.Get("/webhook_endpoints/{id}/deliveries", s.adminListEndpointDeliveries)
		r.Get("/events/{id}/deliveries", s.adminListEventDeliveries)
		r.With(identityBody).Post("/events/{id}/redeliver", s.adminRedeliverEvent)
	}
}

// MetricsHandler serves the Prometheus metrics, on the public address or
// on METRICS_ADDR.
func MetricsHandler(m *metrics.Metrics) http.Handler {
	// A collector in error must not take the other series down with it.
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.ready.Ready(r.Context()); err != nil {
		s.log.WarnContext(r.Context(), "not ready", slog.String("error", err.Error()))
		s.writeError(w, r, payment.Errorf(payment.CodeUnavailable, "not ready"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
