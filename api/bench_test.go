package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// BenchmarkCreatePayment: one new payment per iteration, through HTTP, the
// real PostgreSQL and the in-process simulator.
func BenchmarkCreatePayment(b *testing.B) {
	e := apitest.New(b, apitest.Options{})
	tx0, st0 := e.Counter.Counts()
	rt0 := e.Counter.RoundTrips()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: fmt.Sprintf("bench-%d", i),
			Body: createBody(fmt.Sprintf("bench-order-%d", i), 100)})
		if r.Status != http.StatusCreated {
			b.Fatalf("status %d: %s", r.Status, r.Body)
		}
	}
	tx1, st1 := e.Counter.Counts()
	b.ReportMetric(float64(tx1-tx0)/float64(b.N), "db-tx/op")
	b.ReportMetric(float64(st1-st0)/float64(b.N), "db-stmt/op")
	b.ReportMetric(float64(e.Counter.RoundTrips()-rt0)/float64(b.N), "db-roundtrips/op")
	b.ReportMetric(float64(e.PaymentCalls())/float64(b.N), "provider-calls/op")
}

// BenchmarkReplay: the same key and body again and again.
func BenchmarkReplay(b *testing.B) {
	e := apitest.New(b, apitest.Options{})
	body := createBody("bench-replay", 100)
	if r := create(e, "bench-replay", body); r.Status != http.StatusCreated {
		b.Fatalf("status %d: %s", r.Status, r.Body)
	}
	calls0 := e.PaymentCalls()
	tx0, st0 := e.Counter.Counts()
	rt0 := e.Counter.RoundTrips()
	b.ResetTimer()
	for b.Loop() {
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "bench-replay", Body: body})
		if r.Header.Get("Idempotent-Replayed") != "true" {
			b.Fatalf("not a replay: %d %s", r.Status, r.Body)
		}
	}
	tx1, st1 := e.Counter.Counts()
	b.ReportMetric(float64(tx1-tx0)/float64(b.N), "db-tx/op")
	b.ReportMetric(float64(st1-st0)/float64(b.N), "db-stmt/op")
	b.ReportMetric(float64(e.Counter.RoundTrips()-rt0)/float64(b.N), "db-roundtrips/op")
	b.ReportMetric(float64(e.PaymentCalls()-calls0)/float64(b.N), "provider-calls/op")
}
