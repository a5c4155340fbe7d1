// Package provider defines what the payment service needs from a payment
// provider and how every provider answer is classified. Adapters (Stripe) live
// in sub-packages; nothing outside them knows a provider's wire format.
package provider

import (
	"context"
	"errors"
	"time"
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

// IntentState is a provider's payment state in the service's terms; each
// adapter maps its own statuses onto these, so the domain never compares a
// provider's strings.
type IntentState string

const (
	// IntentAuthorized: funds are held and await capture.
	IntentAuthorized IntentState = "authorized"
	// IntentCaptured: the money was taken.
	IntentCaptured IntentState = "captured"
	// IntentCanceled: the payment can no longer be paid or captured.
	IntentCanceled IntentState = "canceled"
	// IntentNeedsPaymentMethod: the last confirmation failed (a decline) or
	// none was made; nothing is held.
	IntentNeedsPaymentMethod IntentState = "needs_payment_method"
	// IntentRequiresAction: the customer must act (3-D Secure, Pix, Boleto).
	IntentRequiresAction IntentState = "requires_action"
	// IntentProcessing: the provider is processing asynchronously.
	IntentProcessing IntentState = "processing"
	// IntentRequiresConfirmation: created but not confirmed; nothing was
	// attempted, nothing is held.
	IntentRequiresConfirmation IntentState = "requires_confirmation"
	// IntentOther: a state that proves nothing about money moved.
	IntentOther IntentState = "other"
)

// Intent is the provider's view of a payment (a Stripe PaymentIntent).
type Intent struct {
	ID               string
	State            IntentState
	Amount           int64
	AmountCapturable int64
	AmountReceived   int64
	Currency         string // lower case
	CaptureMethod    string // automatic or manual
	Metadata         map[string]string
	// NextAction is what the customer must do while State is
	// IntentRequiresAction; nil otherwise.
	NextAction *NextAction
	// ClientSecret is what a frontend hands the provider to complete the
	// payment: Stripe's client secret for Stripe.js, or the creq that
	// Mercado Pago's 3-D Secure challenge page is posted. Never logged.
	ClientSecret string
	// FailureCode and FailureMessage explain the last failed confirmation
	// (FailureAuthentication when the customer failed 3-D Secure).
	FailureCode    string
	FailureMessage string
	// Closed: the provider takes no further payment on this object, even
	// while its state awaits a payment method. A payment Mercado Pago
	// rejected is closed (each try is a payment of its own); a Stripe
	// intent awaiting another payment method is not.
	Closed bool
}

// FailureAuthentication is the failure code of a payment whose customer
// failed (or abandoned) authentication.
const FailureAuthentication = "authentication_failed"

// FailureExpired is the failure code of a Pix or Boleto that the provider
// let lapse unpaid; the intent may still be open until it is canceled.
const FailureExpired = "action_expired"

// NextActionType names what the customer must do.
type NextActionType string

const (
	NextRedirectToURL   NextActionType = "redirect_to_url"
	NextUseStripeSDK    NextActionType = "use_stripe_sdk"
	NextPixQRCode       NextActionType = "pix_display_qr_code"
	NextBoletoDetails   NextActionType = "boleto_display_details"
	NextActionUnhandled NextActionType = "other"
)

// NextAction is the customer's next step; exactly the field of its Type is
// set. Its JSON is the public shape of CONTRACT §12.
type NextAction struct {
	Type          NextActionType `json:"type"`
	RedirectToURL *RedirectToURL `json:"redirect_to_url,omitempty"`
	PixQRCode     *PixQRCode     `json:"pix_display_qr_code,omitempty"`
	BoletoDetails *BoletoDetails `json:"boleto_display_details,omitempty"`
}

// RedirectToURL sends the customer to the provider's authentication page,
// which returns them to ReturnURL.
type RedirectToURL struct {
	URL       string `json:"url"`
	ReturnURL string `json:"return_url"`
}

// PixQRCode is a Pix charge to show the customer.
type PixQRCode struct {
	Data                  string `json:"data"`
	ImageURLPNG           string `json:"image_url_png"`
	HostedInstructionsURL string `json:"hosted_instructions_url"`
	ExpiresAt             string `json:"expires_at"` // RFC 3339
}

// BoletoDetails is a Boleto voucher to show the customer.
type BoletoDetails struct {
	Number           string `json:"number"`
	HostedVoucherURL string `json:"hosted_voucher_url"`
	PDF              string `json:"pdf"`
	ExpiresAt        string `json:"expires_at"` // RFC 3339
}

// Payment methods the provider creates itself from the request.
const (
	MethodPix    = "pix"
	MethodBoleto = "boleto"
)

// BillingDetails identify the payer (required by Boleto).
type BillingDetails struct {
	Name    string  `json:"name"`
	Email   string  `json:"email"`
	TaxID   string  `json:"tax_id"`
	Address Address `json:"address"`
}

// Address is a billing address.
type Address struct {
	Line1      string `json:"line1"`
	City       string `json:"city"`
	State      string `json:"state"`
	PostalCode string `json:"postal_code"`
	Country    string `json:"country"`
}

// Result is the answer to one provider call. The adapter says what kind of
// Answer it was; Judge decides the Outcome, which depends on whether the key
// was sent before.
type Result struct {
	Answer  Answer
	Outcome Outcome
	// Resent is set by the adapter when the call reached the provider more
	// than once (the client library's own retries): the answer is then the
	// answer to a re-send.
	Resent bool
	// Intent is set when the provider returned the object (also on a decline,
	// when the provider includes it).
	Intent *Intent
	// FailureCode and FailureMessage explain Declined and Failed outcomes.
	FailureCode    string
	FailureMessage string
	// Err is the underlying error for Unknown outcomes, for logs only.
	Err error
}

// Failure codes of answers that prove the provider did nothing on a first
// send (CONTRACT §15): the failover moves to the next provider on either.
const (
	// FailureCredentials: the provider refused the credentials
	// (AnswerCredentials).
	FailureCredentials = "provider_authentication"
	// FailureUnreachable: the request never reached the provider
	// (AnswerUnreachable).
	FailureUnreachable = "provider_unreachable"
)

// AuthorizeRequest creates and confirms a payment at the provider.
type AuthorizeRequest struct {
	IdempotencyKey string // derived provider key, e.g. "pedido-842:autorizar-v1"
	Amount         int64
	Currency       string // upper case ISO code; adapters convert as needed
	// PaymentMethod is a provider token (pm_…), or MethodPix or
	// MethodBoleto for a method the provider creates from this request.
	PaymentMethod string
	CaptureMethod string // automatic or manual
	CustomerID    string // optional
	Description   string // optional
	// Metadata is sent as is; the caller has already merged its own keys
	// (payment_id, order_id, attempt) over the client's.
	Metadata map[string]string
	// ReturnURL, when set, lets 3-D Secure redirect the customer and
	// return them there; without it the frontend uses the client secret.
	ReturnURL string `json:",omitempty"`
	// ExpiresIn: seconds for Pix, days for Boleto. Providers that take a
	// relative expiry (Stripe) send it.
	ExpiresIn int64 `json:",omitempty"`
	// ExpiresAt is when a Pix or Boleto stops being payable, fixed when the
	// attempt was built so that every send of the attempt carries the same
	// body. Providers that take an absolute expiry (Mercado Pago) send it;
	// zero for a card and in attempts stored before it was recorded, which
	// count ExpiresIn from the time of sending.
	ExpiresAt      time.Time       `json:",omitzero"`
	BillingDetails *BillingDetails `json:",omitempty"`
	// MercadoPago is a card tokenized by Mercado Pago's own frontend
	// (CONTRACT §15); PaymentMethod is then ignored by that adapter and
	// this field by the others.
	MercadoPago *MercadoPagoCard `json:",omitempty"`
}

// MercadoPagoCard is what Mercado Pago needs to charge a card: its token,
// the brand its frontend reported (visa, master, …) and the installments.
type MercadoPagoCard struct {
	Token           string `json:"token"`
	PaymentMethodID string `json:"payment_method_id"`
	Installments    int    `json:"installments"`
}

// CaptureRequest captures an authorized payment; Amount 0 captures in full.
type CaptureRequest struct {
	IdempotencyKey string
	IntentID       string
	Amount         int64
}

// CancelRequest cancels an uncaptured payment.
type CancelRequest struct {
	IdempotencyKey string
	IntentID       string
	// Abandoned: the customer never completed the payment before it
	// expired (the service cancels it so it can no longer be paid).
	Abandoned bool `json:",omitempty"`
}

// RefundRequest refunds part or all of a captured payment.
type RefundRequest struct {
	IdempotencyKey string
	IntentID       string
	Amount         int64
	Metadata       map[string]string
}

// RefundState is a provider's refund state in the service's terms.
type RefundState string

const (
	RefundSucceeded RefundState = "succeeded"
	// RefundPending: accepted, money not yet returned; counts as made.
	RefundPending RefundState = "pending"
	RefundFailed  RefundState = "failed"
	RefundOther   RefundState = "other"
)

// Refund is the provider's view of a refund.
type Refund struct {
	ID       string
	State    RefundState
	Amount   int64
	Metadata map[string]string
}

// RefundResult is the answer to a refund call (see Result).
type RefundResult struct {
	Answer         Answer
	Outcome        Outcome
	Resent         bool
	Refund         *Refund
	FailureCode    string
	FailureMessage string
	Err            error
}

// ErrNotFound is returned by lookups when the provider has no such object.
var ErrNotFound = errors.New("provider: not found")

// ErrCredentialsRefused: the provider refused the credentials (unknown,
// revoked, or without the permission asked for); asking again will not
// help.
var ErrCredentialsRefused = errors.New("provider: credentials refused")

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
	// ListRefunds returns every refund of an intent, with its metadata.
	ListRefunds(ctx context.Context, c Credentials, intentID string) ([]Refund, error)
	// ListDisputes returns every dispute of an intent's charges.
	ListDisputes(ctx context.Context, c Credentials, intentID string) ([]Dispute, error)
	// Retries is how often the adapter's client may re-send one call on
	// its own; the service keeps every re-send inside the key's window.
	Retries() int
	// Profile is the provider's idempotency contract, which Judge reads and
	// by which the service decides between re-sending a key and a lookup.
	Profile() Profile
}

// AttemptSearcher is a provider whose search finds the payment one attempt
// made (Mercado Pago's external_reference is "{payment_id}:{attempt}"),
// not any payment carrying the service's payment id.
type AttemptSearcher interface {
	SearchIntentByAttempt(ctx context.Context, c Credentials, paymentID string, attempt int) (*Intent, error)
}

// Notified is a provider whose notifications name an object without
// carrying its state (Mercado Pago's): the events a notification stands
// for are read from the provider.
type Notified interface {
	// NotifiedEvents reads the object a notification of topic names and
	// returns what it shows as events; an error when the provider could
	// not be asked.
	NotifiedEvents(ctx context.Context, c Credentials, topic, action, id string) ([]Event, error)
}

// EventKind is what a provider event is about, in the service's terms.
type EventKind string

const (
	// EventIntent: a payment's state changed; Intent carries it.
	EventIntent EventKind = "intent"
	// EventIntentFailed: a confirmation failed (a decline); Intent and the
	// failure code carry it.
	EventIntentFailed EventKind = "intent_failed"
	// EventRefunded: the refunded total of a payment changed.
	EventRefunded EventKind = "refunded"
	// EventDispute: a dispute of a payment was opened, changed or closed;
	// Dispute carries it.
	EventDispute EventKind = "dispute"
	// EventOther: an event the service does not act on.
	EventOther EventKind = "other"
)

// Event is a verified provider event about one payment.
type Event struct {
	EventID string
	// Type is the provider's own event type, kept for the delivery log.
	Type string
	Kind EventKind
	// Intent is the payment object an intent event carries.
	Intent *Intent
	// IntentID names the payment of any event; AmountRefunded is the
	// provider's refunded total for EventRefunded.
	IntentID       string
	AmountRefunded int64
	FailureCode    string
	FailureMessage string
	// Dispute is the dispute an EventDispute carries.
	Dispute *Dispute
}

// Dispute is a customer's dispute (chargeback) of a payment. Status is the
// provider's own word (warning_needs_response, needs_response,
// under_review, won, lost, …); Closed says whether it is settled.
type Dispute struct {
	ID       string
	IntentID string
	Amount   int64
	Reason   string
	Status   string
	Closed   bool
	// EvidenceDueBy is zero when no evidence can be submitted.
	EvidenceDueBy time.Time
}

// ErrSignature means an event was not signed with the account's secret, or
// its timestamp is outside the tolerance.
var ErrSignature = errors.New("provider: invalid event signature")

// Lister is a provider that pages its payments of a time range in bulk,
// with what the audit of final payments compares (CONTRACT §14), so that
// the audit costs one call per page instead of several per payment.
type Lister interface {
	// ListIntents returns one page of the payments whose ListedBy time
	// lies in [q.From, q.To); Next continues it and is "" on the last page.
	ListIntents(ctx context.Context, c Credentials, q ListQuery) (ListPage, error)
	// ListedBy says which of a payment's times the list ranges over.
	ListedBy() ListedBy
	// ListLag is how long the list may lag the provider's writes: a change
	// made less than this before the list was read may not show in it.
	ListLag() time.Duration
}

// ListedBy is the time a provider's list filters its payments by.
type ListedBy string

const (
	// ListedByCreated: the provider lists by creation only (Stripe).
	ListedByCreated ListedBy = "created"
	// ListedByUpdated: the provider lists by last change (Mercado Pago's
	// date_last_updated), so an old payment refunded lately is listed.
	ListedByUpdated ListedBy = "updated"
)

// ListQuery selects a page of a provider's payments.
type ListQuery struct {
	From, To time.Time
	// Cursor is "" for the first page, else a ListPage's Next.
	Cursor string
	Limit  int
}

// ListPage is one page of a provider's payments.
type ListPage struct {
	Intents []Listed
	Next    string
}

// Listed is one payment as a provider's list shows it.
type Listed struct {
	Intent Intent
	// PaymentID is the service's payment id the object carries (Stripe's
	// metadata payment_id; the part of Mercado Pago's external_reference
	// before the attempt), "" when it carries none.
	PaymentID string
	// Attempt is the attempt Mercado Pago's external_reference names; 0
	// where the provider keeps none.
	Attempt int
	// Refunded is the sum of its succeeded and pending refunds.
	Refunded int64
	// Disputed: the provider shows a dispute or chargeback on it, whose
	// details the list does not carry.
	Disputed bool
}
