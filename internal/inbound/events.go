package inbound

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

// apply applies a provider event. Receipts are deduplicated by event id in
// the same transaction as the effect; the effect itself is a forward
// transition judged on the object the event carries, so order of arrival
// never moves a payment backwards and two events about one change apply
// once. An event that resolves an unknown attempt resolves it like the
// reconciler would, and completes the client's waiting key.
func (s *Service) apply(ctx context.Context, acct payment.Account, n provider.Event) (string, error) {
	p, err := s.findPayment(ctx, acct, n)
	if errors.Is(err, payment.ErrNotFound) {
		return s.record(ctx, acct, n, UnknownObject, "")
	}
	if err != nil {
		return "", err
	}
	ctx = logging.WithPayment(ctx, acct.ID, p.ID)
	pending, err := s.store.AttemptListUnresolvedByPayment(ctx, p.ID)
	if err != nil {
		return "", err
	}
	var auth *payment.Attempt
	for _, a := range pending {
		if a.Operation == payment.OpAuthorize {
			auth = a
		}
	}
	outcome := Ignored
	var settled *payment.Payment
	err = s.withTx(ctx, func(tx Tx) error {
		var err error
		outcome, settled, err = s.applyTx(ctx, tx, acct, p.ID, auth, n)
		return err
	})
	if errors.Is(err, errDuplicateReceipt) {
		return Duplicate, nil
	}
	s.payments.SendReleases(ctx, acct, settled, "webhook")
	return outcome, err
}

// applyTx applies an event to the locked payment and stores its receipt;
// it returns the receipt's outcome, and the payment once stored.
func (s *Service) applyTx(ctx context.Context, tx Tx, acct payment.Account, paymentID string, auth *payment.Attempt, n provider.Event) (string, *payment.Payment, error) {
	now := s.now()
	outcome := Ignored
	var k waitingKey
	if auth != nil && n.Intent != nil {
		r, err := tx.IdempotencyKeyGetByAttemptForUpdate(ctx, auth.ID)
		if err != nil && !errors.Is(err, payment.ErrNotFound) {
			return outcome, nil, err
		}
		k = waitingKey{rec: r, ok: err == nil}
	}
	p, err := tx.PaymentGetByIDForUpdate(ctx, acct.ID, paymentID)
	if err != nil {
		return outcome, nil, err
	}
	before := *p
	disputed, err := s.effect(ctx, tx, p, auth, k, n, now)
	if err != nil {
		return outcome, nil, err
	}
	if p.Status != before.Status || p.AmountRefunded != before.AmountRefunded || disputed {
		outcome = Applied
	}
	inserted, err := tx.ProviderEventReceiptInsert(ctx, Receipt{AccountID: acct.ID, EventID: n.EventID, Type: n.Type,
		Outcome: outcome, PaymentID: p.ID, ReceivedAt: now})
	if err != nil {
		return outcome, nil, err
	}
	if !inserted {
		return outcome, nil, errDuplicateReceipt // undo the effect: it was applied the first time
	}
	return outcome, p, nil
}

// waitingKey is the client's idempotency key of the attempt an event may
// resolve, locked; ok tells there is one.
type waitingKey struct {
	rec idempotency.Record
	ok  bool
}

// effect is the business effect of an event on the locked payment; it
// reports whether a dispute changed.
func (s *Service) effect(ctx context.Context, tx Tx, p *payment.Payment, auth *payment.Attempt, k waitingKey, n provider.Event, now time.Time) (bool, error) {
	switch {
	case n.Intent != nil && !currentIntent(p, n.Intent):
		// An event about an earlier attempt's intent (an ops replay has
		// started a new one since) says nothing about this attempt.
	case n.Intent != nil && auth != nil && !p.Status.Final():
		a, err := s.payments.Apply(ctx, tx, p, auth.ID, eventOutcome(s.payments.ProfileOf(p.Provider), n), "webhook", now)
		if err != nil {
			return false, err
		}
		if a.Status.Answered() && k.ok && k.rec.State != idempotency.StateCompleted {
			return false, s.payments.CompleteKey(ctx, tx, k.rec, p, a, now)
		}
	case n.Intent != nil:
		return false, s.applyIntent(ctx, tx, p, n, now)
	case n.Kind == provider.EventDispute && n.Dispute != nil:
		return s.applyDispute(ctx, tx, p, n, now)
	case n.Kind == provider.EventRefunded:
		return false, s.applyRefunded(ctx, tx, p, n, now)
	}
	return false, nil
}

// applyRefunded records the provider's refunded total. It counts every
// refund the provider made, ours and any made elsewhere; the payment never
// shows less.
func (s *Service) applyRefunded(ctx context.Context, tx Tx, p *payment.Payment, n provider.Event, now time.Time) error {
	before := *p
	p.ProviderAmountRefunded = n.AmountRefunded
	total, err := payment.RefundedTotal(ctx, tx, p)
	if err != nil {
		return err
	}
	if total != p.AmountRefunded || p.ProviderAmountRefunded != before.ProviderAmountRefunded {
		p.AmountRefunded, p.UpdatedAt = total, now
		if err := tx.PaymentUpdateState(ctx, p); err != nil {
			return err
		}
	}
	if total == before.AmountRefunded {
		return nil
	}
	return s.payments.Write(ctx, tx, payment.Change{Payment: p, Events: []string{"payment.refunded"}, Audit: payment.AuditEntry{Actor: "webhook",
		Action: "webhook." + n.Type, Details: map[string]any{"event_id": n.EventID, "amount_refunded": total}}})
}

func (s *Service) findPayment(ctx context.Context, acct payment.Account, n provider.Event) (*payment.Payment, error) {
	id := n.IntentID
	if n.Intent != nil {
		id = n.Intent.ID
	}
	p, err := s.store.PaymentGetByProviderID(ctx, acct.ID, id)
	if errors.Is(err, payment.ErrNotFound) && n.Intent != nil && n.Intent.Metadata["payment_id"] != "" {
		return s.store.PaymentGetByID(ctx, acct.ID, n.Intent.Metadata["payment_id"])
	}
	return p, err
}

// currentIntent reports whether an intent is the provider object of the
// payment's current attempt: the payment's known provider id, or, while it
// is not known yet, the intent the service tagged with the attempt's number.
// The payment_id metadata alone also matches the intents of earlier
// attempts of the same payment.
func currentIntent(p *payment.Payment, in *provider.Intent) bool {
	if p.ProviderPaymentID != "" {
		return in.ID == p.ProviderPaymentID
	}
	return in.Metadata["attempt"] == strconv.Itoa(p.Attempt)
}

// recordIgnored stores the receipt of an event type the service does not
// act on, so a redelivery is still recognized.
func (s *Service) recordIgnored(ctx context.Context, acct payment.Account, n provider.Event) (string, error) {
	return s.record(ctx, acct, n, Ignored, "")
}

// record stores an event's receipt alone, without an effect.
func (s *Service) record(ctx context.Context, acct payment.Account, n provider.Event, outcome, paymentID string) (string, error) {
	err := s.withTx(ctx, func(tx Tx) error {
		inserted, err := tx.ProviderEventReceiptInsert(ctx, Receipt{AccountID: acct.ID, EventID: n.EventID, Type: n.Type,
			Outcome: outcome, PaymentID: paymentID, ReceivedAt: s.now()})
		if err == nil && !inserted {
			return errDuplicateReceipt
		}
		return err
	})
	if errors.Is(err, errDuplicateReceipt) {
		return Duplicate, nil
	}
	return outcome, err
}

// eventOutcome reads an event as a provider answer about the key the
// provider already acted on: the object it carries, or a card refusal.
func eventOutcome(prof provider.Profile, n provider.Event) payment.Outcome {
	a := provider.AnswerObject
	if n.Kind == provider.EventIntentFailed {
		a = provider.AnswerCardError
	}
	return payment.Outcome{Result: provider.Result{Outcome: provider.Judge(prof, a, provider.Send{Recovery: true, InWindow: true, Authorize: true}),
		Answer: a, Intent: n.Intent, FailureCode: n.FailureCode, FailureMessage: n.FailureMessage}}
}

// applyIntent moves a payment whose attempts are settled along a forward
// transition the intent proves (an external capture or cancel, say).
func (s *Service) applyIntent(ctx context.Context, tx Tx, p *payment.Payment, n provider.Event, now time.Time) error {
	to := payment.AuthorizationStatus(eventOutcome(s.payments.ProfileOf(p.Provider), n))
	if to == p.Status || !payment.CanTransition(p.Status, to) || to == payment.StatusUnknown {
		return nil
	}
	from := p.Status
	p.Status, p.UpdatedAt = to, now
	if p.ProviderPaymentID == "" {
		p.ProviderPaymentID = n.Intent.ID
	}
	switch to {
	case payment.StatusCaptured:
		p.AmountCaptured = payment.CapturedAmount(p.Amount, n.Intent)
	case payment.StatusDeclined:
		p.FailureCode, p.FailureMessage = n.FailureCode, n.FailureMessage
	}
	if err := tx.PaymentUpdateState(ctx, p); err != nil {
		return err
	}
	s.payments.CountTransition(p, from)
	if err := s.payments.Write(ctx, tx, payment.Change{Payment: p, From: from, Audit: payment.AuditEntry{Actor: "webhook", Action: "webhook." + n.Type,
		Details: map[string]any{"event_id": n.EventID}}}); err != nil {
		return err
	}
	return s.payments.ArmRelease(ctx, tx, p, payment.OpAuthorize, n.Intent, "webhook", now)
}
