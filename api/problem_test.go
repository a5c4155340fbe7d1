package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
)

// Helpers of the middleware tests: none needs a database.

// testLogger is the service's JSON logger writing to a buffer.
func testLogger() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return logging.New(&buf, slog.LevelDebug), &buf
}

// logLines decodes the JSON lines of buf.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// oneLogLine is the only line of buf.
func oneLogLine(t *testing.T, buf *bytes.Buffer) map[string]any {
	t.Helper()
	lines := logLines(t, buf)
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", len(lines), buf)
	}
	return lines[0]
}

// nextHandler is a trivial next handler that notes it was called and
// answers 204.
type nextHandler struct {
	called bool
	req    *http.Request
}

func (h *nextHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.called, h.req = true, r
	w.WriteHeader(http.StatusNoContent)
}

// wantRecProblem checks rec is a problem+json of status and code, and
// returns it.
func wantRecProblem(t *testing.T, rec *httptest.ResponseRecorder, status int, code payment.Code) problem {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, status)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	if p.Status != status || p.Code != code || p.Title != http.StatusText(status) ||
		p.Type != "https://docs.acmepay.dev/problems/"+string(code) {
		t.Fatalf("problem %+v, want %d %s", p, status, code)
	}
	return p
}

// A store that cannot reach its database answers 503 unavailable with
// Retry-After, logged; the api knows it only as payment.ErrUnavailable.
func TestWriteProblemUnavailable(t *testing.T) {
	log, logs := testLogger()
	for _, err := range []error{
		fmt.Errorf("%w: %w", postgres.ErrUnavailable, io.ErrUnexpectedEOF),
		fmt.Errorf("settle: %w", payment.ErrUnavailable),
	} {
		logs.Reset()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/v1/payments", nil)
		req = req.WithContext(logging.WithFields(req.Context(), &logging.Fields{RequestID: "req-down"}))
		writeProblem(log, rec, req, err)
		p := wantRecProblem(t, rec, http.StatusServiceUnavailable, payment.CodeUnavailable)
		if p.Detail != "the service is temporarily unavailable; retry with the same Idempotency-Key" || p.RequestID != "req-down" {
			t.Fatalf("problem %+v", p)
		}
		if ra := rec.Header().Get("Retry-After"); ra != "2" {
			t.Fatalf("Retry-After %q, want 2", ra)
		}
		line := oneLogLine(t, logs)
		if line["level"] != "ERROR" || line["msg"] != "database unavailable" || line["error"] != err.Error() || line["request_id"] != "req-down" {
			t.Fatalf("log line %v", line)
		}
	}
}

// An error of a client that went away is not the database's: nobody reads
// the answer, and it is logged at debug only.
func TestWriteProblemClientGone(t *testing.T) {
	log, logs := testLogger()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/payments", nil)
	writeProblem(log, rec, req, fmt.Errorf("%w: %w", postgres.ErrUnavailable, context.Canceled))
	p := wantRecProblem(t, rec, http.StatusInternalServerError, payment.CodeInternal)
	if p.Detail != "the client went away" || rec.Header().Get("Retry-After") != "" {
		t.Fatalf("problem %+v, Retry-After %q", p, rec.Header().Get("Retry-After"))
	}
	if line := oneLogLine(t, logs); line["level"] != "DEBUG" || line["msg"] != "request abandoned by the client" {
		t.Fatalf("log line %v", line)
	}
}

// The server's own deadline on a request is not the client leaving: a
// database call it ended is 503 unavailable, which the client reads.
func TestWriteProblemServerDeadline(t *testing.T) {
	log, _ := testLogger()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/payments", nil)
	writeProblem(log, rec, req, fmt.Errorf("%w: %w", postgres.ErrUnavailable, context.DeadlineExceeded))
	wantRecProblem(t, rec, http.StatusServiceUnavailable, payment.CodeUnavailable)
}

// A domain error is shown as it is and logged nowhere; anything else is a
// logged 500 that shows nothing of the error.
func TestWriteProblemDomainAndInternal(t *testing.T) {
	log, logs := testLogger()
	rec := httptest.NewRecorder()
	writeProblem(log, rec, httptest.NewRequest(http.MethodGet, "/", nil),
		&payment.Error{Code: payment.CodeProviderRejected, Message: "no", PaymentID: "pay_1", ProviderCode: "card_declined"})
	p := wantRecProblem(t, rec, http.StatusConflict, payment.CodeProviderRejected)
	if p.Detail != "no" || p.PaymentID != "pay_1" || p.ProviderCode != "card_declined" || logs.Len() != 0 {
		t.Fatalf("problem %+v, logs %q", p, logs)
	}

	rec = httptest.NewRecorder()
	writeProblem(log, rec, httptest.NewRequest(http.MethodGet, "/", nil), errors.New("secret internals"))
	p = wantRecProblem(t, rec, http.StatusInternalServerError, payment.CodeInternal)
	if p.Detail != "internal error; retry with the same Idempotency-Key" || strings.Contains(rec.Body.String(), "secret internals") {
		t.Fatalf("problem %+v", p)
	}
	if line := oneLogLine(t, logs); line["level"] != "ERROR" || line["msg"] != "internal error" || line["error"] != "secret internals" {
		t.Fatalf("log line %v", line)
	}
}
