package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/payment"
)

// A panic is a 500 problem carrying the request id, logged with it; what
// panicked is never shown.
func TestRecoverPanic(t *testing.T) {
	log, logs := testLogger()
	panicky := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom: card 4242") })
	rec := httptest.NewRecorder()
	requestID(recoverPanic(log)(panicky)).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/payments", nil))
	p := wantRecProblem(t, rec, http.StatusInternalServerError, payment.CodeInternal)
	id := rec.Header().Get("X-Request-Id")
	if id == "" || p.RequestID != id || p.Detail != "internal error; retry with the same Idempotency-Key" {
		t.Fatalf("problem %+v, X-Request-Id %q", p, id)
	}
	if strings.Contains(rec.Body.String(), "boom") {
		t.Fatalf("the panic is shown: %s", rec.Body)
	}
	line := oneLogLine(t, logs)
	if line["level"] != "ERROR" || line["msg"] != "internal error" || line["error"] != "panic: boom: card 4242" || line["request_id"] != id {
		t.Fatalf("log line %v", line)
	}
}

// http.ErrAbortHandler is net/http's way to abort a response: it goes on
// up, unanswered and unlogged.
func TestRecoverPanicLetsAbortThrough(t *testing.T) {
	log, logs := testLogger()
	abort := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	rec := httptest.NewRecorder()
	var got any
	func() {
		defer func() { got = recover() }()
		recoverPanic(log)(abort).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	}()
	if got != http.ErrAbortHandler {
		t.Fatalf("recovered %v, want http.ErrAbortHandler", got)
	}
	if rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" || logs.Len() != 0 {
		t.Fatalf("abort answered %q or logged %q", rec.Body, logs)
	}
}

// Without a panic the next handler's answer goes through untouched.
func TestRecoverPanicPassesThrough(t *testing.T) {
	log, logs := testLogger()
	next := &nextHandler{}
	rec := httptest.NewRecorder()
	recoverPanic(log)(next).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if !next.called || rec.Code != http.StatusNoContent || logs.Len() != 0 {
		t.Fatalf("called %v, status %d, logs %q", next.called, rec.Code, logs)
	}
}
