package api

import (
	"net/http"
	"strings"

	"github.com/acmepay/payments/internal/payment"
)

// identityEncoding reports whether the Content-Encoding field lines name no
// coding other than identity. Empty list elements are allowed (RFC 9110
// §5.6.1) and coding names are case-insensitive.
func identityEncoding(values []string) bool {
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.Trim(c, " \t")
			if c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// identityBody refuses a request body sent with a content coding: the
// service reads bodies as they come, and a compressed one would be read as
// garbage. Like every media-type error it is answered before anything is
// reserved.
func identityBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !identityEncoding(r.Header.Values("Content-Encoding")) {
			renderProblem(w, r, payment.Errorf(payment.CodeUnsupportedMediaType,
				"send the body without a Content-Encoding (identity only)"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
