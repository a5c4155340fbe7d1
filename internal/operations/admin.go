package operations

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

// ProviderState is the provider's live view of a payment, for an operator
// comparing it with ours.
type ProviderState struct {
	// Intent is nil when the provider has no object for the payment.
	Intent *provider.Intent
	// Refunded sums the intent's refunds the provider made.
	Refunded int64
	// Searched: the intent was found by its metadata payment_id because we
	// hold no provider id.
	Searched bool
}

// ProviderState asks the provider, now, for a payment of any account: by
// the intent id we hold, or by a search on the payment id when we hold
// none. It reads only; nothing is recorded.
func (s *Service) ProviderState(ctx context.Context, paymentID string) (ProviderState, error) {
	p, err := s.store.PaymentGetAnyAccount(ctx, paymentID)
	if err != nil {
		return ProviderState{}, err
	}
	acct, err := s.accounts.Merchant(ctx, p.AccountID)
	if err != nil {
		return ProviderState{}, err
	}
	b, err := s.providerFor(acct, p)
	if err != nil {
		return ProviderState{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.providerTimeout)
	defer cancel()
	var st ProviderState
	st.Intent, st.Searched, err = b.intent(ctx, p)
	if errors.Is(err, provider.ErrNotFound) {
		return ProviderState{Searched: st.Searched}, nil
	}
	if err != nil {
		return ProviderState{}, err
	}
	refunds, err := b.prov.ListRefunds(ctx, b.creds, st.Intent.ID)
	if err != nil {
		return ProviderState{}, err
	}
	for _, r := range refunds {
		if r.State == provider.RefundSucceeded {
			st.Refunded += r.Amount
		}
	}
	return st, nil
}

// AdminCancel is an operator's cancel of a payment of any account: the
// merchant's cancel, with the same guards, audited with actor and reason.
func (s *Service) AdminCancel(ctx context.Context, key, paymentID, actor, reason string) (idempotency.Answer, error) {
	return s.asMerchant(ctx, paymentID, actor, reason, func(ctx context.Context, acct payment.Account) (idempotency.Answer, error) {
		return s.payments.Cancel(ctx, acct, key, paymentID)
	})
}

// AdminCapture is an operator's capture (in full when amount is 0): the
// merchant's, with the same guards and proof rules, audited with actor and
// reason.
func (s *Service) AdminCapture(ctx context.Context, key, paymentID, actor, reason string, amount int64) (idempotency.Answer, error) {
	return s.asMerchant(ctx, paymentID, actor, reason, func(ctx context.Context, acct payment.Account) (idempotency.Answer, error) {
		return s.payments.Capture(ctx, acct, key, paymentID, amount)
	})
}

// AdminRefund is an operator's refund of amount: the merchant's, with the
// same guards and proof rules, audited with actor and reason.
func (s *Service) AdminRefund(ctx context.Context, key, paymentID, actor, reason string, amount int64) (idempotency.Answer, error) {
	return s.asMerchant(ctx, paymentID, actor, reason, func(ctx context.Context, acct payment.Account) (idempotency.Answer, error) {
		return s.payments.Refund(ctx, acct, key, paymentID, amount)
	})
}

// asMerchant runs a merchant's change of a payment of any account for an
// operator: under the payment's account, with the actor and reason.
func (s *Service) asMerchant(ctx context.Context, paymentID, actor, reason string,
	do func(context.Context, payment.Account) (idempotency.Answer, error)) (idempotency.Answer, error) {
	p, err := s.store.PaymentGetAnyAccount(ctx, paymentID)
	if err != nil {
		return idempotency.Answer{}, err
	}
	acct, err := s.accounts.Merchant(ctx, p.AccountID)
	if err != nil {
		return idempotency.Answer{}, err
	}
	return do(payment.WithReason(payment.WithActor(ctx, actor), reason), acct)
}

// AdminView is a payment with its attempts and audit trail.
type AdminView struct {
	Payment  *payment.Payment     `json:"payment"`
	Attempts []*payment.Attempt   `json:"attempts"`
	Audit    []payment.AuditEntry `json:"audit"`
}

// AdminGet returns a payment of any account with its attempts and audit.
func (s *Service) AdminGet(ctx context.Context, id string) (*AdminView, error) {
	p, err := s.store.PaymentGetAnyAccount(ctx, id)
	if err != nil {
		return nil, err
	}
	as, err := s.store.AttemptListByPayment(ctx, id)
	if err != nil {
		return nil, err
	}
	audit, err := s.store.AuditListByPayment(ctx, id)
	if err != nil {
		return nil, err
	}
	return &AdminView{Payment: p, Attempts: as, Audit: audit}, nil
}

// StuckPayment is a payment in the admin stuck list.
type StuckPayment struct {
	*payment.Payment
	// NeedsAttention: an attempt of it has been unresolved for longer than
	// RECONCILE_ALERT_AFTER.
	NeedsAttention bool
}

// MarshalJSON renders the payment object with needs_attention.
func (p StuckPayment) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		payment.JSONView
		NeedsAttention bool `json:"needs_attention"`
	}{p.View(), p.NeedsAttention})
}

// StuckCursor is a position in the stuck list; the zero value is its start.
type StuckCursor struct {
	UpdatedAt time.Time
	ID        string
}

// StuckQuery selects a page of the stuck list.
type StuckQuery struct {
	// AccountID narrows the list to one account; "" lists every account.
	AccountID     string
	Statuses      []payment.Status
	UpdatedBefore time.Time
	AlertBefore   time.Time
	After         StuckCursor
	Limit         int
}

// maxCursorMicros is the last instant a time cursor may name (the end of
// year 9999): far beyond any row, and inside what PostgreSQL can compare.
var maxCursorMicros = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC).UnixMicro()

// StuckCursors is the codec of the stuck list's after (the API's and the
// console's).
var StuckCursors = payment.Cursor[StuckCursor]{Kind: "stuck", Field: "after",
	Format: func(c StuckCursor) string {
		return strconv.FormatInt(c.UpdatedAt.UnixMicro(), 10) + "." + c.ID
	},
	Parse: func(s string) (StuckCursor, bool) {
		micros, id, ok := strings.Cut(s, ".")
		n, err := strconv.ParseInt(micros, 10, 64)
		if !ok || err != nil || n < 0 || n > maxCursorMicros || !payment.ValidID(id) {
			return StuckCursor{}, false
		}
		return StuckCursor{UpdatedAt: time.UnixMicro(n).UTC(), ID: id}, true
	},
}

// String encodes the cursor as an opaque token; the start is "".
func (c StuckCursor) String() string {
	if c.ID == "" {
		return ""
	}
	return StuckCursors.Encode(c)
}

// ParseStuckCursor reads a token made by StuckCursor.String.
func ParseStuckCursor(v string) (StuckCursor, error) {
	return StuckCursors.Decode(v)
}

// ListStuck returns a page of payments of one account ("" for any) in the
// given statuses, not updated for olderThan, oldest first, after the cursor.
func (s *Service) ListStuck(ctx context.Context, accountID string, statuses []payment.Status, olderThan time.Duration, after StuckCursor, limit int) ([]StuckPayment, error) {
	now := s.now()
	return s.store.PaymentListStuck(ctx, StuckQuery{AccountID: accountID, Statuses: statuses, UpdatedBefore: now.Add(-olderThan),
		AlertBefore: now.Add(-s.alertAfter), After: after, Limit: limit})
}

// ParseStatuses reads a comma-separated status filter.
func ParseStatuses(v string) ([]payment.Status, error) {
	var out []payment.Status
	for _, part := range strings.Split(v, ",") {
		st := payment.Status(strings.TrimSpace(part))
		switch st {
		case payment.StatusProcessing, payment.StatusUnknown, payment.StatusRequiresAction, payment.StatusPending, payment.StatusAuthorized,
			payment.StatusCaptured, payment.StatusDeclined, payment.StatusFailed, payment.StatusCanceled:
			out = append(out, st)
		default:
			return nil, payment.InvalidField("status", "must be a comma-separated list of payment statuses")
		}
	}
	return out, nil
}
