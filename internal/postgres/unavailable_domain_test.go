package postgres_test

import (
	"errors"
	"testing"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
)

// The store's unavailable error is the domain's, so the api needs no
// import of the store; it is no *payment.Error, so the engine still
// retries it and never keeps it as a key's answer.
func TestUnavailableIsTheDomains(t *testing.T) {
	if !errors.Is(postgres.ErrUnavailable, payment.ErrUnavailable) {
		t.Fatal("postgres.ErrUnavailable is not a payment.ErrUnavailable")
	}
	if got := postgres.ErrUnavailable.Error(); got != "database unavailable" {
		t.Fatalf("message %q, want database unavailable", got)
	}
	var e *payment.Error
	if errors.As(postgres.ErrUnavailable, &e) {
		t.Fatalf("postgres.ErrUnavailable is a *payment.Error %v", e)
	}
}
