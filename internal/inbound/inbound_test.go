package inbound

import (
	"context"
	"testing"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

func TestNewChecksDependencies(t *testing.T) {
	parse := func([]byte, string, string) (provider.Event, error) { return provider.Event{}, nil }
	for name, c := range map[string]Config{
		"no payments": {Store: nopStore{}, Parse: parse},
		"no store":    {Payments: &payment.Service{}, Parse: parse},
		"no parse":    {Payments: &payment.Service{}, Store: nopStore{}},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
	if _, err := New(Config{Payments: &payment.Service{}, Store: nopStore{}, Parse: parse}); err != nil {
		t.Fatalf("New: %v", err)
	}
}

// The stored and shown outcomes keep their values.
func TestOutcomeValues(t *testing.T) {
	for got, want := range map[string]string{Applied: "applied", Duplicate: "duplicate", Ignored: "ignored",
		UnknownObject: "unknown_object"} {
		if got != want {
			t.Errorf("outcome %q, want %q", got, want)
		}
	}
}

func TestCurrentIntent(t *testing.T) {
	tagged := func(id, attempt string) *provider.Intent {
		return &provider.Intent{ID: id, Metadata: map[string]string{"payment_id": "pay_1", "attempt": attempt}}
	}
	cases := []struct {
		name string
		p    payment.Payment
		in   *provider.Intent
		want bool
	}{
		{"known id", payment.Payment{ProviderPaymentID: "pi_2", Attempt: 2}, tagged("pi_2", "2"), true},
		{"earlier intent of a known id", payment.Payment{ProviderPaymentID: "pi_2", Attempt: 2}, tagged("pi_1", "2"), false},
		{"tagged with the attempt", payment.Payment{Attempt: 2}, tagged("pi_2", "2"), true},
		{"tagged with an earlier attempt", payment.Payment{Attempt: 2}, tagged("pi_1", "1"), false},
	}
	for _, c := range cases {
		if got := currentIntent(&c.p, c.in); got != c.want {
			t.Errorf("%s: currentIntent = %v, want %v", c.name, got, c.want)
		}
	}
}

var stripeProfile = provider.StripeProfile(provider.StripeKeyRetention, provider.DefaultSearchLag)

func TestEventOutcome(t *testing.T) {
	in := &provider.Intent{ID: "pi_1"}
	if got := eventOutcome(stripeProfile, provider.Event{Kind: provider.EventIntentFailed, Intent: in}).Answer; got != provider.AnswerCardError {
		t.Errorf("a failed intent's answer = %v, want a card error", got)
	}
	if got := eventOutcome(stripeProfile, provider.Event{Kind: provider.EventIntent, Intent: in}).Answer; got != provider.AnswerObject {
		t.Errorf("an intent's answer = %v, want the object", got)
	}
}

// nopStore is a Store whose transactions are plain payment transactions.
type nopStore struct{ Store }

func (nopStore) WithTx(_ context.Context, fn func(payment.Tx) error) error { return fn(plainTx{}) }

type plainTx struct{ payment.Tx }

// A store whose transactions cannot record receipts is refused, not
// half-used.
func TestWithTxNeedsReceipts(t *testing.T) {
	s, err := New(Config{Payments: &payment.Service{}, Store: nopStore{},
		Parse: func([]byte, string, string) (provider.Event, error) { return provider.Event{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	called := false
	err = s.withTx(context.Background(), func(Tx) error { called = true; return nil })
	if err == nil || called {
		t.Fatalf("withTx on a plain transaction: err %v, called %v; want an error before fn", err, called)
	}
}
