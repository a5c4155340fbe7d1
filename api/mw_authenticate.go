package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
)

// keyAuthenticator finds the account of an API key; *account.Service is
// one.
type keyAuthenticator interface {
	Authenticate(ctx context.Context, apiKey string) (account.Account, error)
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
func authenticate(log *slog.Logger, accounts keyAuthenticator) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a, err := accounts.Authenticate(r.Context(), bearer(r))
			if err != nil {
				if payment.ErrorCode(err) == payment.CodeNotFound {
					err = payment.Errorf(payment.CodeUnauthorized, "missing or invalid API key")
				}
				writeProblem(log, w, r, err)
				return
			}
			logging.SetAccount(r.Context(), a.ID)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accountKey{}, a)))
		})
	}
}
