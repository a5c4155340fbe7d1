package payment

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
)

// ProviderShown is what the provider showed of a payment when a refund was
// sent to resolve a discrepancy; the refund's success records it on the
// payment.
type ProviderShown struct {
	IntentID       string `json:"provider_payment_id"`
	AmountCaptured int64  `json:"amount_captured"`
	AmountRefunded int64  `json:"amount_refunded"`
}

// answerResolution answers a resolve with its discrepancy (found by the
// attempt's refund when id is ""): ok once resolved, accepted while its
// refund is in doubt, refused with provider_rejected when the provider
// refused it.
type answerResolution struct {
	s  *Service
	id string
}

func (ar answerResolution) Answer(ctx context.Context, tx Tx, p *Payment, a *Attempt) (idempotency.Answer, error) {
	if a != nil && a.Status == AttemptFailed {
		return ar.s.respond(ctx, tx, p, a)
	}
	dtx, ok := tx.(DiscrepancyTx)
	if !ok {
		return idempotency.Answer{}, errors.New("payment: the store cannot resolve discrepancies")
	}
	var (
		cur *Discrepancy
		err error
	)
	if ar.id != "" {
		cur, err = dtx.DiscrepancyGetByIDForUpdate(ctx, ar.id)
	} else if a != nil {
		var r *Refund
		if r, err = tx.RefundGetByAttempt(ctx, a.ID); err == nil {
			cur, err = dtx.DiscrepancyByRefundForUpdate(ctx, r.ID)
		}
	} else {
		err = errors.New("payment: a resolve's answer needs its discrepancy")
	}
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answerJSON(knownOr(a, idempotency.KindOK), cur)
}

// ResolutionAnswer is the answer of a resolve of discrepancy id (see
// answerResolution), for the resolve's Mutation outside the core.
func (s *Service) ResolutionAnswer(ctx context.Context, tx Tx, id string, p *Payment, a *Attempt) (idempotency.Answer, error) {
	return answerResolution{s: s, id: id}.Answer(ctx, tx, p, a)
}

// settleDiscrepancy carries a refund's outcome to the discrepancy it was
// sent to resolve, in the transaction that records it, whoever records it
// (the request, a retry, the reconciler): success first records on the
// payment what the provider showed, then resolves the discrepancy; a
// refusal leaves it open and free; doubt keeps it held.
func (s *Service) settleDiscrepancy(ctx context.Context, tx Tx, p *Payment, a *Attempt, status AttemptStatus, now time.Time) error {
	dtx, ok := tx.(DiscrepancyTx)
	if !ok || a.Operation != OpRefund {
		return nil
	}
	r, err := tx.RefundGetByAttempt(ctx, a.ID)
	if err != nil {
		return err
	}
	dsc, err := dtx.DiscrepancyByRefundForUpdate(ctx, r.ID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil || dsc.Status != DiscrepancyOpen || dsc.Resolution == nil {
		return err
	}
	switch status {
	case AttemptSucceeded:
	case AttemptFailed:
		_, err := dtx.DiscrepancySetResolutionStatus(ctx, dsc.ID, ResolutionFailed)
		return err
	default:
		_, err := dtx.DiscrepancySetResolutionStatus(ctx, dsc.ID, ResolutionUnknown)
		return err
	}
	res := dsc.Resolution
	details := map[string]any{"discrepancy_id": dsc.ID, "kind": string(dsc.Kind), "resolution": string(ResolveRefund), "refund_id": r.ID}
	if err := s.adoptShown(ctx, tx, p, dsc, r, details, now); err != nil {
		return err
	}
	if err := tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now,
		Actor: res.Actor, Action: "discrepancy.resolved", Reason: res.Reason, Details: details}); err != nil {
		return err
	}
	_, err = dtx.DiscrepancyResolve(ctx, dsc.ID, res.Actor, ResolveRefund, now)
	return err
}

// adoptShown records on the payment what the provider showed when the
// refund was sent: captured, with the provider's captured amount, and its
// refunds made elsewhere. Recording the refund itself follows.
func (s *Service) adoptShown(ctx context.Context, tx Tx, p *Payment, dsc *Discrepancy, r *Refund, details map[string]any, now time.Time) error {
	var shown ProviderShown
	if err := json.Unmarshal(dsc.Adopt, &shown); err != nil {
		return err
	}
	p.ProviderAmountRefunded = max(p.ProviderAmountRefunded, shown.AmountRefunded+r.Amount)
	from := p.Status
	if (from == StatusCaptured && p.AmountCaptured == shown.AmountCaptured) || (from != StatusCaptured && !CanAdopt(from, StatusCaptured)) {
		return nil
	}
	p.Status, p.AmountCaptured, p.UpdatedAt = StatusCaptured, shown.AmountCaptured, now
	p.FailureCode, p.FailureMessage = "", ""
	if p.ProviderPaymentID == "" {
		p.ProviderPaymentID = shown.IntentID
	}
	if err := tx.PaymentUpdateState(ctx, p); err != nil {
		return err
	}
	res := dsc.Resolution
	if from != StatusCaptured {
		s.CountTransition(p, from)
		return s.Write(ctx, tx, Change{Payment: p, From: from, Audit: AuditEntry{Actor: res.Actor,
			Action: "discrepancy.adopt_provider_state", Reason: res.Reason, Details: maps.Clone(details)}})
	}
	return s.Write(ctx, tx, Change{Payment: p, Events: []string{"payment.captured"}, Audit: AuditEntry{Actor: res.Actor,
		Action: "discrepancy.adopt_provider_state", Reason: res.Reason, Details: maps.Clone(details)}})
}
