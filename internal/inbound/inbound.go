// Package inbound takes the provider's events about payments: it records
// the receipt of each event, deduplicated by event id, and applies its
// effect through the payment core's steps. Outbound deliveries to
// merchants are package notify's.
package inbound

import (
	"context"
	"errors"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

// Outcomes of a received event; they are stored and shown.
const (
	Applied       = "applied"
	Duplicate     = "duplicate"
	Ignored       = "ignored"
	UnknownObject = "unknown_object"
)

// Receipt is the stored record that a provider event was received, kept
// apart from its business effect.
type Receipt struct {
	AccountID  string
	EventID    string
	Type       string
	Outcome    string
	PaymentID  string
	ReceivedAt time.Time
}

// Tx is a payment transaction that also records receipts: the store's
// transactions are.
type Tx interface {
	payment.Tx
	// ProviderEventReceiptInsert stores a receipt; false when its event id
	// was already received.
	ProviderEventReceiptInsert(ctx context.Context, r Receipt) (bool, error)
}

// Store is what inbound reads and writes; *postgres.PaymentStore is one.
type Store interface {
	// WithTx runs fn in one transaction, a Tx.
	WithTx(ctx context.Context, fn func(payment.Tx) error) error
	PaymentGetByID(ctx context.Context, accountID, id string) (*payment.Payment, error)
	PaymentGetByProviderID(ctx context.Context, accountID, providerPaymentID string) (*payment.Payment, error)
	AttemptListUnresolvedByPayment(ctx context.Context, paymentID string) ([]*payment.Attempt, error)
}

// ParseFunc verifies an event's signature with the account's secret and
// reads it; provider.ErrSignature when the signature does not hold.
type ParseFunc func(body []byte, signature, secret string) (provider.Event, error)

// Config wires a Service.
type Config struct {
	Payments *payment.Service
	Store    Store
	// Parse reads the provider's events (stripe.ParseEvent).
	Parse ParseFunc
	Now   payment.Clock
}

// Service takes provider events.
type Service struct {
	payments *payment.Service
	store    Store
	parse    ParseFunc
	now      payment.Clock
}

// New checks the dependencies.
func New(c Config) (*Service, error) {
	if c.Payments == nil || c.Store == nil || c.Parse == nil {
		return nil, errors.New("inbound: payments, store and parse are required")
	}
	if c.Now == nil {
		c.Now = payment.NewClock(nil)
	}
	return &Service{payments: c.Payments, store: c.Store, parse: c.Parse, now: c.Now}, nil
}

// Parse verifies and reads an event's body.
func (s *Service) Parse(body []byte, signature, secret string) (provider.Event, error) {
	return s.parse(body, signature, secret)
}

// Receive applies a verified event, or only records its receipt when the
// service does not act on its type; it returns the receipt's outcome.
func (s *Service) Receive(ctx context.Context, acct payment.Account, ev provider.Event) (string, error) {
	if ev.Kind == provider.EventOther {
		return s.recordIgnored(ctx, acct, ev)
	}
	return s.apply(ctx, acct, ev)
}

var errDuplicateReceipt = errors.New("duplicate receipt")

// withTx runs fn in one of the store's transactions.
func (s *Service) withTx(ctx context.Context, fn func(Tx) error) error {
	return s.store.WithTx(ctx, func(tx payment.Tx) error {
		rtx, ok := tx.(Tx)
		if !ok {
			return errors.New("inbound: the store's transaction cannot record receipts")
		}
		return fn(rtx)
	})
}
