package api

import (
	"log/slog"
	"net/http"
	"net/url"

	"github.com/acmepay/payments/internal/payment"
)

// rejectBadText refuses, before routing, a path, header or query that is not text
// PostgreSQL can take (a NUL, invalid UTF-8) or a query that does not parse:
// such input must never reach a query and come back as a 500. A bad path is
// a 404 (no resource has such a name), a bad header or query parameter a
// 400 naming it. Bodies are checked by payment.DecodeStrict.
func rejectBadText(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !payment.ValidText(r.URL.Path) {
				writeProblem(log, w, r, payment.Errorf(payment.CodeNotFound, "no such resource"))
				return
			}
			// net/http refuses NUL and other control bytes in header values
			// but lets invalid UTF-8 through.
			for name, vs := range r.Header {
				for _, v := range vs {
					if err := payment.CheckText(name, v); err != nil {
						writeProblem(log, w, r, err)
						return
					}
				}
			}
			q, err := url.ParseQuery(r.URL.RawQuery)
			if err != nil {
				writeProblem(log, w, r, payment.Errorf(payment.CodeInvalidRequest, "the query string is malformed"))
				return
			}
			for k, vs := range q {
				if err := payment.CheckText(k, k); err != nil {
					writeProblem(log, w, r, err)
					return
				}
				for _, v := range vs {
					if err := payment.CheckText(k, v); err != nil {
						writeProblem(log, w, r, err)
						return
					}
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}
