package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
)

type countedRequest struct {
	route, method string
	status        int
}

type fakeCounter struct{ got []countedRequest }

func (c *fakeCounter) Request(route, method string, status int, d time.Duration) {
	if d < 0 {
		panic("negative duration")
	}
	c.got = append(c.got, countedRequest{route, method, status})
}

// wantCounted checks the one request counted and the one line logged.
func wantCounted(t *testing.T, c *fakeCounter, line map[string]any, msg string, want countedRequest) {
	t.Helper()
	if len(c.got) != 1 || c.got[0] != want {
		t.Fatalf("counted %+v, want %+v", c.got, want)
	}
	if line["level"] != "INFO" || line["msg"] != msg || line["method"] != want.method ||
		line["route"] != want.route || line["status"] != float64(want.status) {
		t.Fatalf("log line %v, want %q %+v", line, msg, want)
	}
	if _, ok := line["duration_ms"].(float64); !ok {
		t.Fatalf("log line %v has no duration_ms", line)
	}
}

// The line names the route pattern, never the path's ids, the query or a
// header value.
func TestAccessLogRoutePatternNoSecrets(t *testing.T) {
	log, logs := testLogger()
	c := &fakeCounter{}
	r := chi.NewRouter()
	r.Use(requestID, accessLog(log, c))
	r.Get("/v1/payments/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) })
	req := httptest.NewRequest(http.MethodGet, "/v1/payments/pay_secret_id?token=query-secret", nil)
	req.Header.Set("Authorization", "Bearer sk_header_secret")
	req.Header.Set("Idempotency-Key", "key-secret")
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	line := oneLogLine(t, logs)
	wantCounted(t, c, line, "request", countedRequest{"/v1/payments/{id}", "GET", http.StatusAccepted})
	if line["request_id"] != rec.Header().Get("X-Request-Id") || line["request_id"] == "" {
		t.Fatalf("log line %v, want request_id %q", line, rec.Header().Get("X-Request-Id"))
	}
	for _, s := range []string{"pay_secret_id", "query-secret", "sk_header_secret", "key-secret"} {
		if strings.Contains(logs.String(), s) {
			t.Fatalf("access log holds %q: %s", s, logs)
		}
	}
}

// Outside a route, or past a mount none of whose routes matched, the route
// is "unmatched"; a made-up method is "other"; a handler that writes
// nothing answered 200.
func TestAccessLogUnmatchedAndOther(t *testing.T) {
	log, logs := testLogger()
	c := &fakeCounter{}
	accessLog(log, c)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("BREW", "/coffee", nil))
	wantCounted(t, c, oneLogLine(t, logs), "request", countedRequest{routeUnmatched, "other", http.StatusOK})

	logs.Reset()
	c = &fakeCounter{}
	r := chi.NewRouter()
	r.Use(accessLog(log, c))
	r.Mount("/console", http.NotFoundHandler())
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/console/nothing", nil))
	wantCounted(t, c, oneLogLine(t, logs), "request", countedRequest{routeUnmatched, "POST", http.StatusNotFound})
}

// The first status written is the one recorded, and the recorder unwraps
// to the real writer so a handler can still flush.
func TestAccessLogFirstStatusAndUnwrap(t *testing.T) {
	log, logs := testLogger()
	c := &fakeCounter{}
	var flushErr error
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("{}"))
		flushErr = http.NewResponseController(w).Flush()
	})
	rec := httptest.NewRecorder()
	accessLog(log, c)(next).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	if flushErr != nil || !rec.Flushed {
		t.Fatalf("flush through the recorder: %v (flushed %v)", flushErr, rec.Flushed)
	}
	wantCounted(t, c, oneLogLine(t, logs), "request", countedRequest{routeUnmatched, "POST", http.StatusCreated})
}

// A client that went away is counted and logged as 499 "client
// disconnected", whatever the handler wrote.
func TestAccessLogClientGone(t *testing.T) {
	log, logs := testLogger()
	c := &fakeCounter{}
	ctx, leave := context.WithCancel(context.Background())
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leave()
		w.WriteHeader(http.StatusInternalServerError)
	})
	accessLog(log, c)(next).ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
	wantCounted(t, c, oneLogLine(t, logs), "client disconnected", countedRequest{routeUnmatched, "GET", statusClientClosed})
}
