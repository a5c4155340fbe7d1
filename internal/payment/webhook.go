package payment

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/provider"
)

// Notice is a verified provider event about one payment.
type Notice = provider.Event

// Delivery outcomes of a webhook.
const (
	DeliveryApplied   = "applied"
	DeliveryDuplicate = "duplicate"
	DeliveryIgnored   = "ignored"
	DeliveryUnknown   = "unknown_object"
)

// Delivery is a stored webhook delivery, kept apart from its business
// effect.
type Delivery struct {
	AccountID  string
	EventID    string
	Type       string
	Outcome    string
	PaymentID  string
	ReceivedAt time.Time
}

var errDuplicateDelivery = errors.New("duplicate delivery")

// ApplyNotice applies a provider event. Deliveries are deduplicated by event
// id in the same transaction as the effect; the effect itself is a forward
// transition judged on the object the event carries, so order of arrival
// never moves a payment backwards and two events about one change apply
// once. An event that resolves an unknown attempt resolves it like the
// reconciler would, and completes the client's waiting key.
func (s *Service) ApplyNotice(ctx context.Context, acct Account, n Notice) (string, error) {
	p, err := s.findNoticePayment(ctx, acct, n)
	if errors.Is(err, ErrNotFound) {
		return s.recordDelivery(ctx, acct, n, DeliveryUnknown, "")
	}
	if err != nil {
		return "", err
	}
	pending, err := s.store.AttemptsUnresolvedByPayment(ctx, p.ID)
	if err != nil {
		return "", err
	}
	var auth *Attempt
	for _, a := range pending {
		if a.Operation == OpAuthorize {
			auth = a
		}
	}
	outcome := DeliveryIgnored
	var settled *Payment
	err = s.store.WithTx(ctx, func(tx Tx) error {
		var err error
		outcome, settled, err = s.applyNoticeTx(ctx, tx, acct, p.ID, auth, n)
		return err
	})
	if errors.Is(err, errDuplicateDelivery) {
		return DeliveryDuplicate, nil
	}
	s.SendReleases(ctx, acct, settled, "webhook")
	return outcome, err
}

// applyNoticeTx applies an event to the locked payment and stores its
// delivery; it returns the delivery's outcome, and the payment once stored.
func (s *Service) applyNoticeTx(ctx context.Context, tx Tx, acct Account, paymentID string, auth *Attempt, n Notice) (string, *Payment, error) {
	now := s.clock()
	outcome := DeliveryIgnored
	var k noticeKey
	if auth != nil && n.Intent != nil {
		r, err := tx.KeyLockByAttempt(ctx, auth.ID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return outcome, nil, err
		}
		k = noticeKey{rec: r, ok: err == nil}
	}
	p, err := tx.PaymentLock(ctx, acct.ID, paymentID)
	if err != nil {
		return outcome, nil, err
	}
	before := *p
	disputed, err := s.noticeEffect(ctx, tx, p, auth, k, n, now)
	if err != nil {
		return outcome, nil, err
	}
	if p.Status != before.Status || p.AmountRefunded != before.AmountRefunded || disputed {
		outcome = DeliveryApplied
	}
	inserted, err := tx.DeliveryInsert(ctx, Delivery{AccountID: acct.ID, EventID: n.EventID, Type: n.Type,
		Outcome: outcome, PaymentID: p.ID, ReceivedAt: now})
	if err != nil {
		return outcome, nil, err
	}
	if !inserted {
		return outcome, nil, errDuplicateDelivery // undo the effect: it was applied the first time
	}
	return outcome, p, nil
}

// noticeKey is the client's idempotency key of the attempt an event may
// resolve, locked; ok tells there is one.
type noticeKey struct {
	rec idempotency.Record
	ok  bool
}

// noticeEffect is the business effect of an event on the locked payment;
// it reports whether a dispute changed.
func (s *Service) noticeEffect(ctx context.Context, tx Tx, p *Payment, auth *Attempt, k noticeKey, n Notice, now time.Time) (bool, error) {
	switch {
	case n.Intent != nil && !currentIntent(p, n.Intent):
		// An event about an earlier attempt's intent (an ops replay has
		// started a new one since) says nothing about this attempt.
	case n.Intent != nil && auth != nil && !p.Status.Final():
		a, err := s.Apply(ctx, tx, p, auth.ID, noticeOutcome(n), "webhook", now)
		if err != nil {
			return false, err
		}
		if a.Status.Answered() && k.ok && k.rec.State != idempotency.StateCompleted {
			return false, s.CompleteKey(ctx, tx, k.rec, p, a, now)
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
func (s *Service) applyRefunded(ctx context.Context, tx Tx, p *Payment, n Notice, now time.Time) error {
	before := *p
	p.ProviderAmountRefunded = n.AmountRefunded
	total, err := RefundedTotal(ctx, tx, p)
	if err != nil {
		return err
	}
	if total != p.AmountRefunded || p.ProviderAmountRefunded != before.ProviderAmountRefunded {
		p.AmountRefunded, p.UpdatedAt = total, now
		if err := tx.PaymentUpdate(ctx, p); err != nil {
			return err
		}
	}
	if total == before.AmountRefunded {
		return nil
	}
	return s.Write(ctx, tx, Change{Payment: p, Events: []string{"payment.refunded"}, Audit: AuditEntry{Actor: "webhook",
		Action: "webhook." + n.Type, Details: map[string]any{"event_id": n.EventID, "amount_refunded": total}}})
}

func (s *Service) findNoticePayment(ctx context.Context, acct Account, n Notice) (*Payment, error) {
	id := n.IntentID
	if n.Intent != nil {
		id = n.Intent.ID
	}
	p, err := s.store.PaymentByProviderID(ctx, acct.ID, id)
	if errors.Is(err, ErrNotFound) && n.Intent != nil && n.Intent.Metadata["payment_id"] != "" {
		return s.store.PaymentGet(ctx, acct.ID, n.Intent.Metadata["payment_id"])
	}
	return p, err
}

// currentIntent reports whether an intent is the provider object of the
// payment's current attempt: the payment's known provider id, or, while it
// is not known yet, the intent the service tagged with the attempt's number.
// The payment_id metadata alone also matches the intents of earlier
// attempts of the same payment.
func currentIntent(p *Payment, in *provider.Intent) bool {
	if p.ProviderPaymentID != "" {
		return in.ID == p.ProviderPaymentID
	}
	return in.Metadata["attempt"] == strconv.Itoa(p.Attempt)
}

// RecordIgnored stores the delivery of an event type the service does not
// act on, so a redelivery is still recognized.
func (s *Service) RecordIgnored(ctx context.Context, acct Account, n Notice) (string, error) {
	return s.recordDelivery(ctx, acct, n, DeliveryIgnored, "")
}

func (s *Service) recordDelivery(ctx context.Context, acct Account, n Notice, outcome, paymentID string) (string, error) {
	err := s.store.WithTx(ctx, func(tx Tx) error {
		inserted, err := tx.DeliveryInsert(ctx, Delivery{AccountID: acct.ID, EventID: n.EventID, Type: n.Type,
			Outcome: outcome, PaymentID: paymentID, ReceivedAt: s.clock()})
		if err == nil && !inserted {
			return errDuplicateDelivery
		}
		return err
	})
	if errors.Is(err, errDuplicateDelivery) {
		return DeliveryDuplicate, nil
	}
	return outcome, err
}

// noticeOutcome reads an event as a provider answer about the key the
// provider already acted on: the object it carries, or a card refusal.
func noticeOutcome(n Notice) Outcome {
	a := provider.AnswerObject
	if n.Kind == provider.EventIntentFailed {
		a = provider.AnswerCardError
	}
	return Outcome{Result: provider.Result{Outcome: provider.Judge(a, provider.Send{Recovery: true, InWindow: true, Authorize: true}),
		Answer: a, Intent: n.Intent, FailureCode: n.FailureCode, FailureMessage: n.FailureMessage}}
}

// applyIntent moves a payment whose attempts are settled along a forward
// transition the intent proves (an external capture or cancel, say).
func (s *Service) applyIntent(ctx context.Context, tx Tx, p *Payment, n Notice, now time.Time) error {
	to := AuthorizationStatus(noticeOutcome(n))
	if to == p.Status || !CanTransition(p.Status, to) || to == StatusUnknown {
		return nil
	}
	from := p.Status
	p.Status, p.UpdatedAt = to, now
	if p.ProviderPaymentID == "" {
		p.ProviderPaymentID = n.Intent.ID
	}
	switch to {
	case StatusCaptured:
		p.AmountCaptured = CapturedAmount(p.Amount, n.Intent)
	case StatusDeclined:
		p.FailureCode, p.FailureMessage = n.FailureCode, n.FailureMessage
	}
	if err := tx.PaymentUpdate(ctx, p); err != nil {
		return err
	}
	s.metrics.PaymentTransition(from, to)
	if err := s.Write(ctx, tx, Change{Payment: p, From: from, Audit: AuditEntry{Actor: "webhook", Action: "webhook." + n.Type,
		Details: map[string]any{"event_id": n.EventID}}}); err != nil {
		return err
	}
	return s.ArmRelease(ctx, tx, p, OpAuthorize, n.Intent, "webhook", now)
}
