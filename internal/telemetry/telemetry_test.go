package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestTransportSendsTheSpanInTraceparent(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
	}))
	t.Cleanup(srv.Close)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	c := &http.Client{Transport: Transport(tp, nil)}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/payments", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sc := spans[0].SpanContext
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; <-got != want {
		t.Errorf("traceparent is not the client span's %s", want)
	}
	if req.Header.Get("Traceparent") != "" {
		t.Error("the caller's request was changed")
	}
}

func TestTransportWithoutTracingIsTheBase(t *testing.T) {
	t.Parallel()
	if Transport(nil, nil) != http.DefaultTransport {
		t.Fatal("no tracer provider must leave the base transport as it is")
	}
	if tp, _, err := Start(context.Background(), Settings{}, "v"); tp != nil || err != nil {
		t.Fatalf("tracing off made a provider %v (%v)", tp, err)
	}
}
