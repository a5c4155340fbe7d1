package payment

import (
	"context"
	"encoding/json"
	"time"
)

// DiscrepancyKind names how our record of a final payment and the
// provider's differ (CONTRACT §14).
type DiscrepancyKind string

const (
	KindStatusMismatch DiscrepancyKind = "status_mismatch"
	// KindPaidAtProviderNotHere: ours failed, canceled or declined, the
	// provider's paid: money taken, order not fulfilled.
	KindPaidAtProviderNotHere  DiscrepancyKind = "paid_at_provider_not_here"
	KindAmountCapturedMismatch DiscrepancyKind = "amount_captured_mismatch"
	KindAmountRefundedMismatch DiscrepancyKind = "amount_refunded_mismatch"
	KindDisputed               DiscrepancyKind = "disputed"
	// KindMissingAtProvider: we recorded the payment with a provider
	// object, and the provider has none.
	KindMissingAtProvider     DiscrepancyKind   = "missing_at_provider"
	discrepancyStatusOpen     DiscrepancyStatus = "open"
	discrepancyStatusResolved DiscrepancyStatus = "resolved"
)

// DiscrepancyStatus is open until an operator resolves it.
type DiscrepancyStatus string

// Discrepancy statuses.
const (
	DiscrepancyOpen     = discrepancyStatusOpen
	DiscrepancyResolved = discrepancyStatusResolved
)

// ResolveAction is what an operator does about a discrepancy.
type ResolveAction string

const (
	// ResolveAdopt makes our record say what the provider says, audited
	// and with its event, as any transition.
	ResolveAdopt ResolveAction = "adopt_provider_state"
	// ResolveRefund returns what the provider still holds through the
	// normal refund path.
	ResolveRefund ResolveAction = "refund"
	// ResolveNote records that an operator saw it; nothing changes.
	ResolveNote ResolveAction = "note"
)

// Discrepancy is one difference the audit found between a final payment
// and the provider's record of it. Ours and Theirs are JSON objects with
// the fields that differ.
type Discrepancy struct {
	ID            string
	AccountID     string
	PaymentID     string
	Kind          DiscrepancyKind
	Ours          json.RawMessage
	Theirs        json.RawMessage
	Status        DiscrepancyStatus
	FirstSeenAt   time.Time
	LastCheckedAt time.Time
	// ClaimKeyHash and ClaimedUntil: the resolve (by its key's hash) that
	// holds the discrepancy while it asks the provider.
	ClaimKeyHash []byte
	ClaimedUntil *time.Time
	// Resolution is the action taken, nil until one was.
	Resolution *DiscrepancyResolution
	// Adopt is what the provider showed when a refund was sent for it
	// (providerShown), recorded on the payment when the refund succeeds.
	Adopt json.RawMessage
}

// DiscrepancyResolution is the action an operator took on a discrepancy. Status is
// processing or unknown while a refund is in flight, then succeeded or
// failed.
type DiscrepancyResolution struct {
	Action   ResolveAction
	RefundID string
	Status   string
	Actor    string
	Reason   string
	At       time.Time
}

// Resolution statuses.
const (
	ResolutionProcessing = "processing"
	ResolutionUnknown    = "unknown"
	ResolutionSucceeded  = "succeeded"
	ResolutionFailed     = "failed"
)

// Held reports whether a refund sent for the discrepancy is in flight: it
// stays open and no other resolve may act.
func (d *Discrepancy) Held() bool {
	return d.Resolution != nil && (d.Resolution.Status == ResolutionProcessing || d.Resolution.Status == ResolutionUnknown)
}

type resolutionJSON struct {
	Action   ResolveAction `json:"action"`
	RefundID string        `json:"refund_id,omitempty"`
	Status   string        `json:"status"`
	Actor    string        `json:"actor"`
	At       string        `json:"at"`
}

// MarshalJSON renders the public discrepancy object.
func (d *Discrepancy) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID            string            `json:"id"`
		Object        string            `json:"object"`
		PaymentID     string            `json:"payment_id"`
		AccountID     string            `json:"account_id"`
		Kind          DiscrepancyKind   `json:"kind"`
		Ours          json.RawMessage   `json:"ours"`
		Theirs        json.RawMessage   `json:"theirs"`
		Status        DiscrepancyStatus `json:"status"`
		FirstSeenAt   string            `json:"first_seen_at"`
		LastCheckedAt string            `json:"last_checked_at"`
		Resolution    *resolutionJSON   `json:"resolution"`
	}{d.ID, "discrepancy", d.PaymentID, d.AccountID, d.Kind, d.Ours, d.Theirs, d.Status,
		FormatTime(d.FirstSeenAt), FormatTime(d.LastCheckedAt), d.resolutionJSON()})
}

func (d *Discrepancy) resolutionJSON() *resolutionJSON {
	r := d.Resolution
	if r == nil {
		return nil
	}
	return &resolutionJSON{Action: r.Action, RefundID: r.RefundID, Status: r.Status, Actor: r.Actor, At: FormatTime(r.At)}
}

// DiscrepancyTx is what resolving needs of a transaction beyond Tx.
type DiscrepancyTx interface {
	DiscrepancyGetByIDForUpdate(ctx context.Context, id string) (*Discrepancy, error)
	// DiscrepancyResolve closes an open discrepancy; ErrNotFound when it is
	// not open.
	DiscrepancyResolve(ctx context.Context, id, actor string, action ResolveAction, now time.Time) (*Discrepancy, error)
	// DiscrepancyStartRefund records the refund a resolve sent (status
	// processing) and what the provider showed; it ends the claim.
	DiscrepancyStartRefund(ctx context.Context, id string, r DiscrepancyResolution, adopt []byte, reason string) (*Discrepancy, error)
	// DiscrepancyByRefundForUpdate locks the discrepancy a refund was sent for;
	// ErrNotFound for any other refund.
	DiscrepancyByRefundForUpdate(ctx context.Context, refundID string) (*Discrepancy, error)
	DiscrepancySetResolutionStatus(ctx context.Context, id, status string) (*Discrepancy, error)
}
