// Package payment is the domain: payments, their attempts at the provider,
// the allowed state transitions, and the Service that runs the money path
// (reserve the client key and write the intent, call the provider outside any
// transaction with a derived key, record the outcome and the stored response).
package payment

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// Status of a payment.
type Status string

const (
	StatusProcessing Status = "processing"
	StatusUnknown    Status = "unknown"
	// StatusRequiresAction: the customer must act (3-D Secure, scan a Pix
	// QR code, pay a Boleto voucher).
	StatusRequiresAction Status = "requires_action"
	// StatusPending: the provider is processing asynchronously; nothing for
	// the customer to do.
	StatusPending    Status = "pending"
	StatusAuthorized Status = "authorized"
	StatusCaptured   Status = "captured"
	StatusDeclined   Status = "declined"
	StatusFailed     Status = "failed"
	StatusCanceled   Status = "canceled"
)

// Final reports whether the payment's outcome is settled for clients.
func (s Status) Final() bool {
	switch s {
	case StatusProcessing, StatusUnknown, StatusRequiresAction, StatusPending:
		return false
	}
	return true
}

// Waiting reports whether the provider accepted the payment and it waits
// for the customer or the provider: the create has its answer, the outcome
// is still to come.
func (s Status) Waiting() bool { return s == StatusRequiresAction || s == StatusPending }

// Live statuses block a second payment for the same order.
func (s Status) Live() bool {
	switch s {
	case StatusProcessing, StatusUnknown, StatusRequiresAction, StatusPending, StatusAuthorized, StatusCaptured:
		return true
	}
	return false
}

// transitions lists every allowed change. Every path (API, retry,
// reconciler, webhook, admin) goes through CanTransition.
var transitions = map[Status][]Status{
	StatusProcessing: {StatusUnknown, StatusRequiresAction, StatusPending, StatusAuthorized, StatusCaptured, StatusDeclined, StatusFailed, StatusCanceled},
	// An unknown outcome, once learned, may be any the first answer could
	// have been.
	StatusUnknown:        {StatusRequiresAction, StatusPending, StatusAuthorized, StatusCaptured, StatusDeclined, StatusFailed, StatusCanceled},
	StatusRequiresAction: {StatusPending, StatusAuthorized, StatusCaptured, StatusDeclined, StatusCanceled},
	StatusPending:        {StatusAuthorized, StatusCaptured, StatusFailed, StatusCanceled},
	StatusAuthorized:     {StatusCaptured, StatusCanceled},
	// Only an audited ops replay, after the provider proved the last
	// attempt had no effect, starts a new attempt on a final payment.
	StatusDeclined: {StatusProcessing},
	StatusFailed:   {StatusProcessing},
}

// CanTransition reports whether a payment may move from one status to
// another. Staying put is not a transition.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// CanAdopt reports whether an operator may move a payment to the state the
// provider proves it is in, after the audit found the two apart: any
// allowed transition, and also from one final status to another (a
// payment we hold as canceled that the provider shows as paid).
func CanAdopt(from, to Status) bool {
	return CanTransition(from, to) || (from != to && from.Final() && to.Final())
}

// Operation names an operation at the provider; it is part of the derived
// provider key.
type Operation string

const (
	OpAuthorize Operation = "autorizar"
	OpCapture   Operation = "capturar"
	OpCancel    Operation = "cancelar"
	OpRefund    Operation = "estornar"
)

// ProviderKey derives the idempotency key sent to the provider. It is never
// random: every retry and recovery of an attempt re-sends the same key.
func ProviderKey(orderID string, op Operation, n int) string {
	return fmt.Sprintf("%s:%s-v%d", orderID, op, n)
}

// NextAction is what the customer must do (CONTRACT §12).
type NextAction = provider.NextAction

// Payment is one intent to charge for one order.
type Payment struct {
	ID            string
	AccountID     string
	OrderID       string
	Attempt       int
	Amount        int64
	Currency      string
	CaptureMethod string
	PaymentMethod string
	CustomerID    string
	Description   string
	Metadata      map[string]string
	Status        Status
	// Provider names the provider the payment runs at (ProviderStripe,
	// ProviderMercadoPago); "" reads as Stripe.
	Provider          string
	ProviderPaymentID string
	AmountCaptured    int64
	AmountRefunded    int64
	// ProviderAmountRefunded is the refunded total the provider last
	// reported; AmountRefunded never shows less.
	ProviderAmountRefunded int64
	FailureCode            string
	FailureMessage         string
	// Options: return_url, expires_in and billing details of the create.
	Options MethodOptions
	// NextAction is the public next_action while the payment requires
	// action; ClientSecret the provider's, for Stripe.js; ActionExpiresAt
	// when a Pix or Boleto can no longer be paid.
	NextAction      *NextAction
	ClientSecret    string
	ActionExpiresAt *time.Time
	// Disputes the provider reported, oldest first (CONTRACT §14).
	Disputes []Dispute
	// Version grows by one with every change of the payment, so a consumer
	// of events can drop a stale snapshot (CONTRACT §3).
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// AttemptStatus is the state of one provider call.
type AttemptStatus string

const (
	AttemptProcessing AttemptStatus = "processing"
	AttemptUnknown    AttemptStatus = "unknown"
	// AttemptWaiting: the provider accepted the authorization and it waits
	// for the customer or the provider; the reconciler polls it.
	AttemptWaiting   AttemptStatus = "waiting"
	AttemptSucceeded AttemptStatus = "succeeded"
	AttemptDeclined  AttemptStatus = "declined"
	AttemptFailed    AttemptStatus = "failed"
)

// Resolved reports whether the attempt's outcome is known.
func (s AttemptStatus) Resolved() bool {
	return s != AttemptProcessing && s != AttemptUnknown && s != AttemptWaiting
}

// Answered reports whether the client's key has its answer: the outcome is
// known, or the payment waits for the customer.
func (s AttemptStatus) Answered() bool { return s.Resolved() || s == AttemptWaiting }

// Attempt is one try at the provider for one operation of a payment.
type Attempt struct {
	ID          string
	AccountID   string
	PaymentID   string
	OrderID     string
	Operation   Operation
	Number      int
	ProviderKey string
	// Provider is where the attempt is sent; "" reads as Stripe.
	Provider         string
	Status           AttemptStatus
	Request          json.RawMessage
	ProviderObjectID string
	// FailureCode and FailureMessage explain a failed attempt.
	FailureCode    string
	FailureMessage string
	LeaseExpiresAt *time.Time
	// ReconcileTries counts the reconciler's claims; NextReconcileAt is
	// when it may claim the attempt again.
	ReconcileTries  int
	NextReconcileAt *time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// RefundStatus is the state of a refund.
type RefundStatus string

const (
	RefundProcessing RefundStatus = "processing"
	RefundUnknown    RefundStatus = "unknown"
	RefundSucceeded  RefundStatus = "succeeded"
	RefundFailed     RefundStatus = "failed"
)

// Refund returns part or all of a captured payment. Its id is the
// service's own; the payment keeps status captured and its amount_refunded
// grows.
type Refund struct {
	ID               string
	AccountID        string
	PaymentID        string
	AttemptID        string
	Amount           int64
	Status           RefundStatus
	ProviderRefundID string
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// MarshalJSON renders the public refund object. A refund still in flight
// is shown as unknown: the client treats it as not final.
func (r *Refund) MarshalJSON() ([]byte, error) {
	st := r.Status
	if st == RefundProcessing {
		st = RefundUnknown
	}
	return json.Marshal(struct {
		ID               string       `json:"id"`
		Object           string       `json:"object"`
		PaymentID        string       `json:"payment_id"`
		Amount           int64        `json:"amount"`
		Status           RefundStatus `json:"status"`
		ProviderRefundID *string      `json:"provider_refund_id"`
		CreatedAt        string       `json:"created_at"`
	}{r.ID, "refund", r.PaymentID, r.Amount, st, nullable(r.ProviderRefundID), FormatTime(r.CreatedAt)})
}

// MarshalJSON renders an attempt for operators. The request is left out:
// it carries the payment method.
func (a *Attempt) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID               string        `json:"id"`
		Operation        Operation     `json:"operation"`
		Number           int           `json:"number"`
		ProviderKey      string        `json:"provider_key"`
		Provider         string        `json:"provider"`
		Status           AttemptStatus `json:"status"`
		ProviderObjectID *string       `json:"provider_object_id"`
		CreatedAt        string        `json:"created_at"`
		UpdatedAt        string        `json:"updated_at"`
	}{a.ID, a.Operation, a.Number, a.ProviderKey, ProviderOf(a.Provider), a.Status, nullable(a.ProviderObjectID), FormatTime(a.CreatedAt), FormatTime(a.UpdatedAt)})
}

// AuditEntry is one line of a payment's audit trail.
type AuditEntry struct {
	AccountID string         `json:"-"`
	PaymentID string         `json:"-"`
	At        time.Time      `json:"at"`
	Actor     string         `json:"actor"`
	Action    string         `json:"action"`
	Reason    string         `json:"reason"`
	Details   map[string]any `json:"details"`
}

// Event is a payment state change for downstream consumers.
type Event struct {
	ID        string
	AccountID string
	PaymentID string
	Type      string
	CreatedAt time.Time
	Payload   json.RawMessage
}

// JSONView is the public JSON shape of a payment; field order is fixed so a
// stored response and a later read of the same state are byte-identical.
type JSONView struct {
	ID                string  `json:"id"`
	Object            string  `json:"object"`
	OrderID           string  `json:"order_id"`
	Amount            int64   `json:"amount"`
	Currency          string  `json:"currency"`
	CaptureMethod     string  `json:"capture_method"`
	Status            Status  `json:"status"`
	Attempt           int     `json:"attempt"`
	Provider          string  `json:"provider"`
	ProviderPaymentID *string `json:"provider_payment_id"`
	AmountCaptured    int64   `json:"amount_captured"`
	AmountRefunded    int64   `json:"amount_refunded"`
	FailureCode       *string `json:"failure_code"`
	FailureMessage    *string `json:"failure_message"`
	// Null unless the payment waits for the customer (CONTRACT §3).
	NextAction   *NextAction `json:"next_action"`
	ClientSecret *string     `json:"client_secret"`
	// Always a list, so the shape is the same with or without disputes.
	Disputes  []Dispute         `json:"disputes"`
	Metadata  map[string]string `json:"metadata"`
	CreatedAt string            `json:"created_at"`
	UpdatedAt string            `json:"updated_at"`
	Version   int64             `json:"version"`
}

// MarshalJSON renders the public payment object.
func (p *Payment) MarshalJSON() ([]byte, error) { return json.Marshal(p.View()) }

// View is the payment's public JSON shape, for renderings that extend it.
func (p *Payment) View() JSONView {
	md := p.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return JSONView{
		ID: p.ID, Object: "payment", OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency,
		CaptureMethod: p.CaptureMethod, Status: p.Status, Attempt: p.Attempt, Provider: ProviderOf(p.Provider),
		ProviderPaymentID: nullable(p.ProviderPaymentID), AmountCaptured: p.AmountCaptured,
		AmountRefunded: p.AmountRefunded, FailureCode: nullable(p.FailureCode),
		FailureMessage: nullable(p.FailureMessage), Metadata: md,
		NextAction: p.NextAction, ClientSecret: nullable(p.ClientSecret), Disputes: NonNilDisputes(p.Disputes),
		CreatedAt: FormatTime(p.CreatedAt), UpdatedAt: FormatTime(p.UpdatedAt), Version: max(p.Version, 1),
	}
}

// FormatTime is the one timestamp format of the API.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00") }

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// AgeCount is how many payments in one status have been in it for one age
// bucket: under_5m, 5m_to_1h, 1h_to_24h or over_24h.
type AgeCount struct {
	Status Status
	Age    string
	N      int64
}
