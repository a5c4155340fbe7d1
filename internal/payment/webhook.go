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
		now := s.clock()
		var (
			rec    idempotency.Record
			hasKey bool
		)
		if auth != nil && n.Intent != nil {
			r, err := tx.KeyLockByAttempt(ctx, auth.ID)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			rec, hasKey = r, err == nil
		}
		p, err := tx.PaymentLock(ctx, acct.ID, p.ID)
		if err != nil {
			return err
		}
		before := *p
		disputed := false
		switch {
		case n.Intent != nil && !currentIntent(p, n.Intent):
			// An event about an earlier attempt's intent (an ops replay has
			// started a new one since) says nothing about this attempt.
		case n.Intent != nil && auth != nil && !p.Status.Final():
			out := noticeOutcome(n)
			a, err := s.apply(ctx, tx, p, auth.ID, out, "webhook", now)
			if err != nil {
				return err
			}
			if a.Status.Answered() && hasKey && rec.State != idempotency.StateCompleted {
				if err := s.completeKey(ctx, tx, rec, p, a, now); err != nil {
					return err
				}
			}
		case n.Intent != nil:
			if err := s.applyIntent(ctx, tx, p, n, now); err != nil {
				return err
			}
		case n.Kind == provider.EventDispute && n.Dispute != nil:
			if disputed, err = s.applyDispute(ctx, tx, p, n, now); err != nil {
				return err
			}
		case n.Kind == provider.EventRefunded:
			// The provider's total counts every refund it made, ours and any
			// made elsewhere; the payment never shows less.
			p.ProviderAmountRefunded = n.AmountRefunded
			total, err := refundedTotal(ctx, tx, p)
			if err != nil {
				return err
			}
			if total != p.AmountRefunded || p.ProviderAmountRefunded != before.ProviderAmountRefunded {
				p.AmountRefunded, p.UpdatedAt = total, now
				if err := tx.PaymentUpdate(ctx, p); err != nil {
					return err
				}
			}
			if total != before.AmountRefunded {
				if err := s.write(ctx, tx, Change{Payment: p, Events: []string{"payment.refunded"}, Audit: AuditEntry{Actor: "webhook",
					Action: "webhook." + n.Type, Details: map[string]any{"event_id": n.EventID, "amount_refunded": total}}}); err != nil {
					return err
				}
			}
		}
		if p.Status != before.Status || p.AmountRefunded != before.AmountRefunded || disputed {
			outcome = DeliveryApplied
		}
		inserted, err := tx.DeliveryInsert(ctx, Delivery{AccountID: acct.ID, EventID: n.EventID, Type: n.Type,
			Outcome: outcome, PaymentID: p.ID, ReceivedAt: now})
		if err != nil {
			return err
		}
		if !inserted {
			return errDuplicateDelivery // undo the effect: it was applied the first time
		}
		settled = p
		return nil
	})
	if errors.Is(err, errDuplicateDelivery) {
		return DeliveryDuplicate, nil
	}
	s.sendReleases(ctx, acct, settled, "webhook")
	return outcome, err
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
func noticeOutcome(n Notice) outcome {
	a := provider.AnswerObject
	if n.Kind == provider.EventIntentFailed {
		a = provider.AnswerCardError
	}
	return outcome{Result: provider.Result{Outcome: provider.Judge(a, provider.Send{Recovery: true, InWindow: true, Authorize: true}),
		Answer: a, Intent: n.Intent, FailureCode: n.FailureCode, FailureMessage: n.FailureMessage}}
}

// applyIntent moves a payment whose attempts are settled along a forward
// transition the intent proves (an external capture or cancel, say).
func (s *Service) applyIntent(ctx context.Context, tx Tx, p *Payment, n Notice, now time.Time) error {
	to := authorizationStatus(noticeOutcome(n))
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
		p.AmountCaptured = capturedAmount(p.Amount, n.Intent)
	case StatusDeclined:
		p.FailureCode, p.FailureMessage = n.FailureCode, n.FailureMessage
	}
	if err := tx.PaymentUpdate(ctx, p); err != nil {
		return err
	}
	s.metrics.PaymentTransition(from, to)
	if err := s.write(ctx, tx, Change{Payment: p, From: from, Audit: AuditEntry{Actor: "webhook", Action: "webhook." + n.Type,
		Details: map[string]any{"event_id": n.EventID}}}); err != nil {
		return err
	}
	return s.armRelease(ctx, tx, p, OpAuthorize, n.Intent, "webhook", now)
}
