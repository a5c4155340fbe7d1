package api

import (
	"net/http"
	"strings"

	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/telemetry"
	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// traceRequests serves each request in a server span named after its
// route. A caller's traceparent becomes a link, never the parent: a
// merchant's sampling decision and trace ids do not decide the service's.
// Without a tracer provider it is no middleware at all.
func traceRequests(tp trace.TracerProvider) func(http.Handler) http.Handler {
	if tp == nil {
		return func(next http.Handler) http.Handler { return next }
	}
	tracer := tp.Tracer("github.com/acmepay/payments/api")
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithNewRoot(),
				trace.WithAttributes(semconv.HTTPRequestMethodKey.String(methodLabel(r.Method)))}
			remote := telemetry.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			if sc := trace.SpanContextFromContext(remote); sc.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
			}
			ctx, span := tracer.Start(r.Context(), "HTTP "+r.Method, opts...)
			defer span.End()
			rec := &statusRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r.WithContext(ctx))
			route := routeUnmatched
			if rc := chi.RouteContext(ctx); rc != nil {
				if p := rc.RoutePattern(); p != "" && !strings.HasSuffix(p, "/*") {
					route = p
				}
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			span.SetName(methodLabel(r.Method) + " " + route)
			f := logging.Current(ctx)
			span.SetAttributes(semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(status),
				attribute.String("request_id", f.RequestID))
			if f.AccountID != "" {
				span.SetAttributes(attribute.String("account_id", f.AccountID))
			}
			if f.PaymentID != "" {
				span.SetAttributes(attribute.String("payment_id", f.PaymentID))
			}
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		})
	}
}
