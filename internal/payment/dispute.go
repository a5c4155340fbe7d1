package payment

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// Dispute is a customer's dispute (chargeback) of a payment, as the
// provider reported it. Status is the provider's word; Closed says it is
// settled (won, lost).
type Dispute struct {
	ID            string
	Amount        int64
	Reason        string
	Status        string
	Closed        bool
	EvidenceDueBy *time.Time
}

type disputeJSON struct {
	ID            string  `json:"id"`
	Amount        int64   `json:"amount"`
	Reason        string  `json:"reason"`
	Status        string  `json:"status"`
	EvidenceDueBy *string `json:"evidence_due_by"`
	// Closed is kept in storage only: the public shape is CONTRACT §14's.
	Closed bool `json:"-"`
}

// MarshalJSON renders the public dispute object.
func (d Dispute) MarshalJSON() ([]byte, error) {
	j := disputeJSON{ID: d.ID, Amount: d.Amount, Reason: d.Reason, Status: d.Status}
	if d.EvidenceDueBy != nil {
		s := FormatTime(*d.EvidenceDueBy)
		j.EvidenceDueBy = &s
	}
	return json.Marshal(j)
}

// storedDispute is a dispute as the payments row keeps it.
type storedDispute struct {
	ID            string     `json:"id"`
	Amount        int64      `json:"amount"`
	Reason        string     `json:"reason"`
	Status        string     `json:"status"`
	Closed        bool       `json:"closed"`
	EvidenceDueBy *time.Time `json:"evidence_due_by"`
}

// EncodeDisputes is the stored form of a payment's disputes.
func EncodeDisputes(ds []Dispute) ([]byte, error) {
	out := make([]storedDispute, 0, len(ds))
	for _, d := range ds {
		out = append(out, storedDispute(d))
	}
	return json.Marshal(out)
}

// DecodeDisputes reads the stored form.
func DecodeDisputes(b []byte) ([]Dispute, error) {
	var in []storedDispute
	if len(b) > 0 {
		if err := json.Unmarshal(b, &in); err != nil {
			return nil, err
		}
	}
	out := make([]Dispute, 0, len(in))
	for _, d := range in {
		out = append(out, Dispute(d))
	}
	return out, nil
}

// NonNilDisputes is ds, or an empty list: the shape is a list either way.
func NonNilDisputes(ds []Dispute) []Dispute {
	if ds == nil {
		return []Dispute{}
	}
	return ds
}

// FromProviderDispute is our record of a provider's dispute.
func FromProviderDispute(d provider.Dispute) Dispute {
	out := Dispute{ID: d.ID, Amount: d.Amount, Reason: d.Reason, Status: d.Status, Closed: d.Closed}
	if !d.EvidenceDueBy.IsZero() {
		t := d.EvidenceDueBy.UTC()
		out.EvidenceDueBy = &t
	}
	return out
}

// MergeDispute puts d into ds (replacing the one with its id) and reports
// whether anything changed. A settled dispute never reopens: an update
// delivered after the close changes nothing.
func MergeDispute(ds []Dispute, d Dispute) ([]Dispute, bool) {
	i := slices.IndexFunc(ds, func(x Dispute) bool { return x.ID == d.ID })
	if i < 0 {
		return append(slices.Clone(ds), d), true
	}
	old := ds[i]
	if old.Closed && !d.Closed {
		return ds, false
	}
	if old.Status == d.Status && old.Amount == d.Amount && old.Reason == d.Reason && old.Closed == d.Closed &&
		timesEqual(old.EvidenceDueBy, d.EvidenceDueBy) {
		return ds, false
	}
	out := slices.Clone(ds)
	out[i] = d
	return out, true
}

func timesEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
