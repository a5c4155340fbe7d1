package api

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
)

// requestCounter is the part of the metrics the access log feeds.
type requestCounter interface {
	Request(route, method string, status int, d time.Duration)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// accessLog writes one line per request and counts it. It logs the route
// pattern, never the URL's query or any header value. Every label comes from
// a fixed set: the route patterns, "unmatched", the methods of methodLabels
// and "other", and the statuses the handlers write (499 for a client that
// went away).
func accessLog(log *slog.Logger, m requestCounter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &statusRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			route := routeUnmatched
			// A pattern ending in /* is a mount whose routes all missed.
			if rc := chi.RouteContext(r.Context()); rc != nil {
				if p := rc.RoutePattern(); p != "" && !strings.HasSuffix(p, "/*") {
					route = p
				}
			}
			if rec.status == 0 {
				rec.status = http.StatusOK
			}
			status, msg := rec.status, "request"
			if clientGone(r) {
				status, msg = statusClientClosed, "client disconnected"
			}
			d := time.Since(start)
			method := methodLabel(r.Method)
			m.Request(route, method, status, d)
			log.LogAttrs(r.Context(), slog.LevelInfo, msg,
				slog.String("method", method), slog.String("route", route),
				slog.Int("status", status), slog.Float64("duration_ms", float64(d.Microseconds())/1000))
		})
	}
}
