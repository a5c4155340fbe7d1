package api

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/logging"
)

var generatedRequestID = regexp.MustCompile(`^req_[0-9a-f]{24}$`)

// serveRequestID runs requestID with id as the caller's X-Request-Id ("-":
// none) and returns the id echoed and the one the next handler saw.
func serveRequestID(t *testing.T, id string) (echoed, seen string) {
	t.Helper()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = logging.RequestID(r.Context())
		w.WriteHeader(http.StatusNoContent)
	})
	req := httptest.NewRequest(http.MethodGet, "/v1/payments", nil)
	if id != "-" {
		req.Header.Set("X-Request-Id", id)
	}
	rec := httptest.NewRecorder()
	requestID(next).ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		t.Fatalf("status %d, want the next handler's 204", rec.Code)
	}
	return rec.Header().Get("X-Request-Id"), seen
}

func TestRequestIDPropagated(t *testing.T) {
	for _, id := range []string{"abc", "A.b_c-9", strings.Repeat("x", 64)} {
		echoed, seen := serveRequestID(t, id)
		if echoed != id || seen != id {
			t.Fatalf("caller's id %q: echoed %q, in context %q", id, echoed, seen)
		}
	}
}

// A missing or malformed id, or one holding a card number, is replaced by
// a fresh one, echoed and in the context for every log line.
func TestRequestIDGenerated(t *testing.T) {
	seenIDs := map[string]bool{}
	for _, id := range []string{"-", "", "has space", "a/b", strings.Repeat("x", 65), "ação", "4242424242424242", "ord-4000056655665556"} {
		echoed, seen := serveRequestID(t, id)
		if !generatedRequestID.MatchString(echoed) || seen != echoed {
			t.Fatalf("caller's id %q: echoed %q, in context %q, want a fresh req_ id in both", id, echoed, seen)
		}
		if seenIDs[echoed] {
			t.Fatalf("id %q made twice", echoed)
		}
		seenIDs[echoed] = true
	}
}

// The id goes with every log line of the request.
func TestRequestIDInLogs(t *testing.T) {
	log, logs := testLogger()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "inside")
	})
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("X-Request-Id", "req-logged")
	requestID(next).ServeHTTP(httptest.NewRecorder(), req)
	if line := oneLogLine(t, logs); line["request_id"] != "req-logged" {
		t.Fatalf("log line %v, want request_id req-logged", line)
	}
}
