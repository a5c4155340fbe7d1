// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_*
// settings and instruments the service's outbound HTTP. Tracing is off
// unless an OTLP endpoint is configured: then no tracer provider exists,
// nothing is instrumented and no span is ever allocated.
package telemetry

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME is unset.
const DefaultServiceName = "payments"

// Settings are the tracing settings read from the environment.
type Settings struct {
	// On is true when an OTLP endpoint is set and neither
	// OTEL_SDK_DISABLED nor OTEL_TRACES_EXPORTER=none turns tracing off.
	On bool
	// Sampler is OTEL_TRACES_SAMPLER with OTEL_TRACES_SAMPLER_ARG.
	Sampler sdktrace.Sampler
	// ServiceName is OTEL_SERVICE_NAME, or DefaultServiceName.
	ServiceName string
}

// Load reads OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER,
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, the
// OTLP protocol, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG; a bad value is one clear error. The exporter
// reads the other OTEL_EXPORTER_OTLP_* settings (headers, timeout,
// certificates) itself.
func Load(getenv func(string) string) (Settings, error) {
	s := Settings{ServiceName: getenv("OTEL_SERVICE_NAME")}
	if s.ServiceName == "" {
		s.ServiceName = DefaultServiceName
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))); v {
	case "", "false":
	case "true":
		return s, nil
	default:
		return s, fmt.Errorf("OTEL_SDK_DISABLED must be true or false, not %q", v)
	}
	switch v := getenv("OTEL_TRACES_EXPORTER"); v {
	case "", "otlp":
	case "none":
		return s, nil
	default:
		return s, fmt.Errorf("OTEL_TRACES_EXPORTER must be otlp or none, not %q", v)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := getenv(name); v != "" && v != "http/protobuf" {
			return s, fmt.Errorf("%s must be http/protobuf (the only OTLP protocol this build sends), not %q", name, v)
		}
	}
	s.On = getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	var err error
	s.Sampler, err = sampler(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG"))
	return s, err
}

// sampler is the SDK's sampler of that name; "" is the SDK's default,
// parentbased_always_on.
func sampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := 1.0
	if arg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, not %q", arg)
		}
		ratio = r
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER must be always_on, always_off, traceidratio, parentbased_always_on, "+
		"parentbased_always_off or parentbased_traceidratio, not %q", name)
}

// Start builds the tracer provider that exports to the OTLP endpoint in
// batches. It returns a nil provider when tracing is off; shutdown flushes
// what is buffered and is never nil.
func Start(ctx context.Context, s Settings, version string) (trace.TracerProvider, func(context.Context) error, error) {
	if !s.On {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(s.ServiceName), semconv.ServiceVersion(version)))
	if err != nil {
		return nil, nil, err
	}
	// OTEL_RESOURCE_ATTRIBUTES are added to, never over, the service's name.
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(env, res); err == nil {
			res = merged
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(s.Sampler))
	return tp, tp.Shutdown, nil
}
