package api

import (
	"crypto/subtle"
	"log/slog"
	"net/http"

	"github.com/acmepay/payments/internal/authlimit"
	"github.com/acmepay/payments/internal/payment"
)

// adminOnly guards /admin/v1 with the admin token; empty, the admin API
// does not exist. An address with too many recent failures is refused
// before its token is looked at, so guessing costs a minute per ten tries.
func adminOnly(log *slog.Logger, token string, limiter *authlimit.Limiter) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if token == "" {
				writeProblem(log, w, r, payment.Errorf(payment.CodeNotFound, "no such resource"))
				return
			}
			client := limiter.Client(r)
			if wait, blocked := limiter.Blocked(client); blocked {
				w.Header().Set("Retry-After", authlimit.RetryAfter(wait))
				writeProblem(log, w, r, payment.Errorf(payment.CodeRateLimited, "too many failed admin authentications from this address; retry later"))
				return
			}
			if subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(token)) != 1 {
				if limiter.Fail(client) {
					log.WarnContext(r.Context(), "admin authentication failures reached the limit", slog.String("client", client.String()))
				}
				writeProblem(log, w, r, payment.Errorf(payment.CodeUnauthorized, "missing or invalid admin token"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
