package api

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"regexp"

	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
)

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID takes a well-formed X-Request-Id from the caller or makes one.
func requestID(next http.Handler) http.Handler {
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
