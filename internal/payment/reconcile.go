package payment

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// AdminView is a payment with its attempts and audit trail.
type AdminView struct {
	Payment  *Payment     `json:"payment"`
	Attempts []*Attempt   `json:"attempts"`
	Audit    []AuditEntry `json:"audit"`
}

// AdminGet returns a payment of any account with its attempts and audit.
func (s *Service) AdminGet(ctx context.Context, id string) (*AdminView, error) {
	p, err := s.store.PaymentGetAny(ctx, id)
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
	*Payment
	// NeedsAttention: an attempt of it has been unresolved for longer than
	// RECONCILE_ALERT_AFTER.
	NeedsAttention bool
}

// MarshalJSON renders the payment object with needs_attention.
func (p StuckPayment) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		view
		NeedsAttention bool `json:"needs_attention"`
	}{p.view(), p.NeedsAttention})
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
	Statuses      []Status
	UpdatedBefore time.Time
	AlertBefore   time.Time
	After         StuckCursor
	Limit         int
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

// validID accepts the service's own ids (prefix_ then hex).
func validID(id string) bool {
	prefix, rest, ok := strings.Cut(id, "_")
	if !ok || prefix == "" || len(rest) != 32 {
		return false
	}
	for _, r := range prefix + rest {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// ListStuck returns a page of payments of one account ("" for any) in the
// given statuses, not updated for olderThan, oldest first, after the cursor.
func (s *Service) ListStuck(ctx context.Context, accountID string, statuses []Status, olderThan time.Duration, after StuckCursor, limit int) ([]StuckPayment, error) {
	now := s.clock()
	return s.store.PaymentListStuck(ctx, StuckQuery{AccountID: accountID, Statuses: statuses, UpdatedBefore: now.Add(-olderThan),
		AlertBefore: now.Add(-s.alertAfter), After: after, Limit: limit})
}

// ParseStatuses reads a comma-separated status filter.
func ParseStatuses(v string) ([]Status, error) {
	var out []Status
	for _, part := range strings.Split(v, ",") {
		st := Status(strings.TrimSpace(part))
		switch st {
		case StatusProcessing, StatusUnknown, StatusRequiresAction, StatusPending, StatusAuthorized, StatusCaptured, StatusDeclined, StatusFailed, StatusCanceled:
			out = append(out, st)
		default:
			return nil, fieldError("status", "must be a comma-separated list of payment statuses")
		}
	}
	return out, nil
}
