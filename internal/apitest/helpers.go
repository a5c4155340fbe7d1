package apitest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/provider/providersim"
)

// CreateBody is a manual-capture create request for an order.
func CreateBody(order string, amount int) string {
	return fmt.Sprintf(`{"order_id":%q,"amount":%d,"currency":"BRL","payment_method":"pm_card_visa","capture_method":"manual"}`, order, amount)
}

// CreateRequest is the create call with a client key.
func CreateRequest(key, body string) Request {
	return Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: body}
}

// Create posts a create with a client key.
func (e *Env) Create(key, body string) *Response {
	e.T.Helper()
	return e.Do(CreateRequest(key, body))
}

// WantStatus fails the test unless the response has the status.
func WantStatus(t testing.TB, r *Response, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status = %d, want %d; body %s", r.Status, want, r.Body)
	}
}

// WantAuthorizations fails the test unless the simulator performed exactly
// want successful authorizations.
func WantAuthorizations(t testing.TB, sim *providersim.Server, want int) {
	t.Helper()
	if got := sim.Stats().Authorizations; got != want {
		t.Fatalf("authorizations at the provider = %d, want %d", got, want)
	}
}

// SecretSuffix is the test's name in the characters a provider secret may
// hold, to make secrets unique per test (sk_test_ + SecretSuffix(t)).
func SecretSuffix(t testing.TB) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
}

// PaymentCalls counts the simulator's requests about payments: all of them
// but the account lookups (GET /v1/account) each registration makes.
func (e *Env) PaymentCalls() int {
	n := 0
	for _, r := range e.Sim.Requests() {
		if r.Op != "account" {
			n++
		}
	}
	return n
}
