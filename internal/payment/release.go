package payment

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// An attempt that ends declined or failed can leave its intent payable at
// the provider (awaiting another payment method after a card refusal or a
// failed 3-D Secure challenge), with a client secret the customer's page
// still holds. That intent is canceled at the provider before any next
// attempt for the order is sent (CONTRACT §16): the cancel, a release, is
// an attempt of the payment like any other, armed in the transaction that
// records the decline, sent right after it and otherwise by the
// reconciler; until it settles the order takes no new attempt.

// reasonRelease is the audit reason of a release.
const reasonRelease = "release_earlier_intent"

// payable tells whether an intent could still be paid; an answer that
// carried no intent proves nothing, so it counts as payable. A closed one
// (a payment Mercado Pago rejected) never can.
func payable(in *provider.Intent) bool {
	if in == nil {
		return true
	}
	if in.Closed {
		return false
	}
	switch in.State {
	case provider.IntentCanceled, provider.IntentAuthorized, provider.IntentCaptured:
		return false
	}
	return true
}

// ArmRelease writes, in the caller's transaction, the cancel of the intent
// of a payment whose authorization has just ended declined or failed while
// the intent may still be paid. It is written without a lease: the path that
// recorded the decline claims and sends it once its transaction commits,
// and the reconciler takes it if that path cannot.
func (s *Service) ArmRelease(ctx context.Context, tx Tx, p *Payment, op Operation, in *provider.Intent, actor string, now time.Time) error {
	if !needsRelease(p, op, in) {
		return nil
	}
	return s.insertRelease(ctx, tx, p, p.ProviderPaymentID, actor, now)
}

func (s *Service) insertRelease(ctx context.Context, tx Tx, p *Payment, intentID, actor string, now time.Time) error {
	n, err := tx.AttemptNextNumber(ctx, p.AccountID, p.OrderID, OpCancel)
	if err != nil {
		return err
	}
	req := cancelRequest{CancelRequest: provider.CancelRequest{IdempotencyKey: ProviderKey(p.OrderID, OpCancel, n),
		IntentID: intentID}, From: p.Status, Release: true}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r := s.newAttempt(p, s.newID("att"), OpCancel, n, b, now)
	r.LeaseExpiresAt = nil
	if err := tx.AttemptInsert(ctx, r); err != nil {
		return err
	}
	return tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now, Actor: actor,
		Action: "cancelar.requested", Reason: reasonRelease,
		Details: map[string]any{"attempt_id": r.ID, "provider_key": r.ProviderKey, "provider_payment_id": intentID}})
}

// paidStatus is the payment status of an intent that holds or took the
// money; "" otherwise.
func paidStatus(in *provider.Intent) Status {
	if in == nil {
		return ""
	}
	switch in.State {
	case provider.IntentAuthorized:
		return StatusAuthorized
	case provider.IntentCaptured:
		return StatusCaptured
	}
	return ""
}

// SendReleases sends, right away, the releases armed for a payment that
// has just ended declined or failed. One that cannot be sent or confirmed
// now is left to the reconciler, and holds the order meanwhile.
func (s *Service) SendReleases(ctx context.Context, acct Account, p *Payment, actor string) {
	if p == nil || (p.Status != StatusDeclined && p.Status != StatusFailed) {
		return
	}
	pending, err := s.store.AttemptListUnresolvedByPayment(ctx, p.ID)
	if err != nil {
		s.log.WarnContext(ctx, "release not sent; the reconciler will send it",
			slog.String("payment_id", p.ID), slog.String("error", err.Error()))
		return
	}
	for _, a := range pending {
		if a.Operation != OpCancel || !readCancel(a).Release {
			continue
		}
		// Never claimed (armed without a lease, no outcome recorded): its
		// key was never sent, so this is its first send.
		first := a.Status == AttemptProcessing && a.LeaseExpiresAt == nil && a.ReconcileTries == 0
		now := s.clock()
		claimed, err := s.store.AttemptClaimByID(ctx, a.ID, now, now.Add(s.ClaimLease()))
		if err != nil {
			continue // another path holds it, or the database is away: the reconciler owns it
		}
		out := s.CallProvider(ctx, acct, p, claimed, !first)
		_ = s.settleAttempt(ctx, claimed, func(ctx context.Context, tx Tx) error {
			cur, err := tx.PaymentGetByIDForUpdate(ctx, acct.ID, claimed.PaymentID)
			if err != nil {
				return err
			}
			_, err = s.Apply(ctx, tx, cur, claimed.ID, out, actor, s.clock())
			return err
		})
	}
}

// orderHeld is the refusal of a next attempt while an earlier intent
// of the order may still be paid.
func orderHeld(paymentID string) *Error {
	e := Errorf(CodeOrderHasActivePayment, "an earlier payment of this order is still being canceled at the provider; retry later")
	e.PaymentID = paymentID
	return e
}

// CheckOrderHeld refuses a next attempt for an order while a release of an
// earlier payment is unsettled. Call it after the statement that may have
// waited for the transaction recording a decline, so its snapshot sees the
// release armed there.
func CheckOrderHeld(ctx context.Context, tx Tx, accountID, orderID string, code Code) error {
	held, err := tx.AttemptCancelHoldingOrder(ctx, accountID, orderID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if code == CodeOrderHasActivePayment {
		return orderHeld(held)
	}
	e := Errorf(code, "the cancel of the earlier intent at the provider is not confirmed yet; no new attempt is made until it is")
	e.PaymentID = held
	return e
}
