package telemetry

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Propagator is the W3C trace context (traceparent, tracestate), the one
// format the service reads and sends.
var Propagator = propagation.TraceContext{}

// Transport sends each request in a client span and passes the span on to
// the server in traceparent, so a provider's logs can name the call. A nil
// provider returns base itself (nil meaning http.DefaultTransport).
func Transport(tp trace.TracerProvider, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if tp == nil {
		return base
	}
	return transport{tracer: tp.Tracer("github.com/acmepay/payments/internal/telemetry"), base: base}
}

type transport struct {
	tracer trace.Tracer
	base   http.RoundTripper
}

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, span := t.tracer.Start(r.Context(), "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.ServerAddress(r.URL.Hostname()),
			attribute.String("url.path", r.URL.Path)))
	defer span.End()
	// A RoundTripper must not change the caller's request.
	out := r.Clone(ctx)
	Propagator.Inject(ctx, propagation.HeaderCarrier(out.Header))
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		span.SetStatus(codes.Error, "no answer")
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
	}
	return resp, nil
}
