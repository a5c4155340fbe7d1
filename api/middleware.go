package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/authlimit"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
	"github.com/go-chi/chi/v5"
)

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID takes a well-formed X-Request-Id from the caller or makes one.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		// A caller's id is logged and echoed: one that holds a card number
		// is replaced like a malformed one.
		if !requestIDPattern.MatchString(id) || payment.ContainsCardNumber(id) {
			b := make([]byte, 12)
			_, _ = rand.Read(b)
			id = "req_" + hex.EncodeToString(b)
		}
		w.Header().Set("X-Request-Id", id)
		ctx := logging.WithFields(r.Context(), &logging.Fields{RequestID: id})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
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
func (s *Server) accessLog(next http.Handler) http.Handler {
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
		s.metrics.Request(route, method, status, d)
		s.log.LogAttrs(r.Context(), slog.LevelInfo, msg,
			slog.String("method", method), slog.String("route", route),
			slog.Int("status", status), slog.Float64("duration_ms", float64(d.Microseconds())/1000))
	})
}

func (s *Server) recoverPanic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.writeError(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

type accountKey struct{}

func accountFrom(r *http.Request) account.Account {
	a, _ := r.Context().Value(accountKey{}).(account.Account)
	return a
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// authenticate resolves the API key to its account; everything under /v1
// is scoped to it.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := s.accounts.Authenticate(r.Context(), bearer(r))
		if err != nil {
			if payment.ErrorCode(err) == payment.CodeNotFound {
				err = payment.Errorf(payment.CodeUnauthorized, "missing or invalid API key")
			}
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, a)))
	})
}

// adminOnly guards /admin/v1 with ADMIN_TOKEN; unset, the admin API does
// not exist. An address with too many recent failures is refused before
// its token is looked at, so guessing costs a minute per ten tries.
func (s *Server) adminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.adminToken == "" {
			s.writeError(w, r, payment.Errorf(payment.CodeNotFound, "no such resource"))
			return
		}
		client := s.authLimiter.Client(r)
		if wait, blocked := s.authLimiter.Blocked(client); blocked {
			w.Header().Set("Retry-After", authlimit.RetryAfter(wait))
			s.writeError(w, r, payment.Errorf(payment.CodeRateLimited, "too many failed admin authentications from this address; retry later"))
			return
		}
		if subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(s.adminToken)) != 1 {
			if s.authLimiter.Fail(client) {
				s.log.WarnContext(r.Context(), "admin authentication failures reached the limit", slog.String("client", client.String()))
			}
			s.writeError(w, r, payment.Errorf(payment.CodeUnauthorized, "missing or invalid admin token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
