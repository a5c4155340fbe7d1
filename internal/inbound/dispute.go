package inbound

import (
	"context"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

// applyDispute records a dispute event on the payment and emits
// payment.disputed, or payment.dispute_closed once it is settled. It
// changes neither the status nor the amounts.
func (s *Service) applyDispute(ctx context.Context, tx Tx, p *payment.Payment, n provider.Event, now time.Time) (bool, error) {
	d := payment.FromProviderDispute(*n.Dispute)
	ds, changed := payment.MergeDispute(p.Disputes, d)
	if !changed {
		return false, nil
	}
	p.Disputes, p.UpdatedAt = ds, now
	if err := tx.PaymentSetDisputes(ctx, p); err != nil {
		return false, err
	}
	ev := "payment.disputed"
	if d.Closed {
		ev = "payment.dispute_closed"
	}
	return true, s.payments.Write(ctx, tx, payment.Change{Payment: p, Events: []string{ev}, Audit: payment.AuditEntry{Actor: "webhook", Action: "webhook." + n.Type,
		Details: map[string]any{"event_id": n.EventID, "dispute_id": d.ID, "dispute_status": d.Status, "amount": d.Amount}}})
}
