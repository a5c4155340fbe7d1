package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestCreateTrace: one create's trace holds the request, its two
// transactions around the provider call, the provider's HTTP request
// (whose traceparent the simulator received), and the enqueued delivery,
// whose work span links back to it.
func TestCreateTrace(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	e := apitest.New(t, apitest.Options{TracerProvider: tp, WebhookAllowPrivate: true})
	srv := httptest.NewServer(&receiver{})
	t.Cleanup(srv.Close)
	ep := createEndpoint(t, e, "k-ep-trace", srv.URL, "payment.authorized")["id"].(string)
	exp.Reset()

	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-trace",
		Headers: map[string]string{"Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		Body:    apitest.CreateBody("pedido-trace", 2000)})
	apitest.WantStatus(t, r, http.StatusCreated)
	jobs := webhookJobsFor(t, e, ep)
	if len(jobs) != 1 {
		t.Fatalf("%d delivery jobs, want 1", len(jobs))
	}
	if _, err := e.WorkWebhookJob(t, jobs[0]); err != nil {
		t.Fatalf("delivery: %v", err)
	}

	spans := exp.GetSpans()
	req := only(t, spans, "POST /v1/payments")
	if req.SpanKind != trace.SpanKindServer || req.Parent.IsValid() {
		t.Fatalf("request span kind %v parent %v, want a server root", req.SpanKind, req.Parent)
	}
	if len(req.Links) != 1 || req.Links[0].SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("the caller's traceparent is not a link of the request span: %v", req.Links)
	}
	call := only(t, spans, "provider.call")
	childOf(t, call, req)
	var before, after bool
	for _, s := range named(spans, "db.transaction") {
		if s.Parent.SpanID() != req.SpanContext.SpanID() {
			continue
		}
		before = before || s.EndTime.Before(call.StartTime)
		after = after || s.StartTime.After(call.EndTime)
	}
	if !before || !after {
		t.Errorf("want a transaction of the request before the provider call (%v) and one after it (%v)", before, after)
	}
	hreq := only(t, spans, "HTTP POST")
	childOf(t, hreq, call)
	want := "00-" + hreq.SpanContext.TraceID().String() + "-" + hreq.SpanContext.SpanID().String() + "-01"
	if got := e.Sim.LastTraceparent("pedido-trace:autorizar-v1"); got != want {
		t.Errorf("the simulator received traceparent %q, want the provider request's %q", got, want)
	}

	work := only(t, spans, "river.work/webhook_delivery")
	inserted := false
	for _, s := range named(spans, "river.insert_many") {
		for _, l := range work.Links {
			inserted = inserted || (l.SpanContext.SpanID() == s.SpanContext.SpanID() && s.SpanContext.TraceID() == req.SpanContext.TraceID())
		}
	}
	if !inserted {
		t.Errorf("the delivery's work span does not link to an insert of the create's trace")
	}
}

func named(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func only(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	got := named(spans, name)
	if len(got) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("%d spans named %q, want 1; spans: %q", len(got), name, names)
	}
	return got[0]
}

func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		t.Errorf("span %q is not a child of %q", child.Name, parent.Name)
	}
}
