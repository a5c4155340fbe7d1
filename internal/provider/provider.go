// Package provider defines what the payment service needs from a payment
// provider and how every provider answer is classified. Adapters (Stripe) live
// in sub-packages; nothing outside them knows a provider's wire format.
package provider

import (
	"context"
	"errors"
)

// Outcome classifies a provider answer. When an answer cannot be classified
// with certainty it is Unknown: the caller must never guess a failure.
type Outcome string

const (
	// Succeeded: the provider performed the operation.
	Succeeded Outcome = "succeeded"
	// Declined: the provider refused the card (authorization only).
	Declined Outcome = "declined"
	// Failed: the provider rejected the request as invalid; nothing happened.
	Failed Outcome = "failed"
	// Unknown: timeout, 5xx, 429 after retries, connection lost, or anything
	// unclear. The operation may or may not have taken effect.
	Unknown Outcome = "unknown"
)

// Credentials select the provider account an operation runs against.
type Credentials struct {
	SecretKey string
}

// Intent is the provider's view of a payment (a Stripe PaymentIntent).
type Intent struct {
	ID               string
	Status           string // provider status, e.g. requires_capture, succeeded, canceled
	Amount           int64
	AmountCapturable int64
	AmountReceived   int64
	Currency         string // lower case
	CaptureMethod    string // automatic or manual
	Metadata         map[string]string
}

// Result is the classified answer to one provider call.
type Result struct {
	Outcome Outcome
	// Intent is set when the provider returned the object (also on a decline,
	// when the provider includes it).
	Intent *Intent
	// FailureCode and FailureMessage explain Declined and Failed outcomes.
	FailureCode    string
	FailureMessage string
	// Err is the underlying error for Unknown outcomes, for logs only.
	Err error
}

// AuthorizeRequest creates and confirms a payment at the provider.
type AuthorizeRequest struct {
	IdempotencyKey string // derived provider key, e.g. "pedido-842:autorizar-v1"
	Amount         int64
	Currency       string // upper case ISO code; adapters convert as needed
	PaymentMethod  string
	CaptureMethod  string // automatic or manual
	CustomerID     string // optional
	Description    string // optional
	// Metadata is sent as is; the caller has already merged its own keys
	// (payment_id, order_id, attempt) over the client's.
	Metadata map[string]string
}

// CaptureRequest captures an authorized payment; Amount 0 captures in full.
type CaptureRequest struct {
	IdempotencyKey string
	IntentID       string
	Amount         int64
}

// CancelRequest cancels an authorized, uncaptured payment.
type CancelRequest struct {
	IdempotencyKey string
	IntentID       string
}

// RefundRequest refunds part or all of a captured payment.
type RefundRequest struct {
	IdempotencyKey string
	IntentID       string
	Amount         int64
	Metadata       map[string]string
}

// Refund is the provider's view of a refund.
type Refund struct {
	ID     string
	Status string // succeeded, pending, failed, canceled
	Amount int64
}

// RefundResult is the classified answer to a refund call.
type RefundResult struct {
	Outcome        Outcome
	Refund         *Refund
	FailureCode    string
	FailureMessage string
	Err            error
}

// ErrNotFound is returned by lookups when the provider has no such object.
var ErrNotFound = errors.New("provider: not found")

// Provider is a payment provider. Every mutating call carries a derived
// idempotency key and must be safe to re-send unchanged.
type Provider interface {
	Authorize(ctx context.Context, c Credentials, r AuthorizeRequest) Result
	Capture(ctx context.Context, c Credentials, r CaptureRequest) Result
	Cancel(ctx context.Context, c Credentials, r CancelRequest) Result
	Refund(ctx context.Context, c Credentials, r RefundRequest) RefundResult
	// RetrieveIntent returns the intent, ErrNotFound, or another error when the
	// provider could not be asked.
	RetrieveIntent(ctx context.Context, c Credentials, id string) (*Intent, error)
	// SearchIntentByPaymentID finds the intent whose metadata payment_id
	// matches, ErrNotFound when there is none.
	SearchIntentByPaymentID(ctx context.Context, c Credentials, paymentID string) (*Intent, error)
}
