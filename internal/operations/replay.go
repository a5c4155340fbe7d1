package operations

import (
	"context"
	"errors"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/payment"
)

// Replay is an operator's replay of a stuck or failed order. It reconciles
// first; a success found at the provider is adopted without a new attempt;
// only once the provider proved the last attempt had no effect (declined,
// failed, not found) does it make a new attempt with the next provider key,
// audited with actor, reason and the attempt it replaces. While the outcome
// is still unknown it refuses: never a blind new attempt.
func (s *Service) Replay(ctx context.Context, key, paymentID, actor, reason string) (idempotency.Answer, error) {
	before, err := s.store.PaymentGetAnyAccount(ctx, paymentID)
	if err != nil {
		return idempotency.Answer{}, err
	}
	acct, err := s.accounts.Merchant(ctx, before.AccountID)
	if err != nil {
		return idempotency.Answer{}, err
	}
	k, err := payment.NewKey(acct.ID, idempotency.OpAdminReplay, key, paymentID, struct {
		PaymentID string `json:"payment_id"`
		Actor     string `json:"actor"`
		Reason    string `json:"reason"`
	}{paymentID, actor, reason})
	if err != nil {
		return idempotency.Answer{}, err
	}
	ans, err := s.payments.Execute(payment.WithActor(ctx, actor), acct, k, &replaying{s, acct, before, actor, reason})
	if errors.Is(err, payment.ErrLiveOrderConflict) {
		return idempotency.Answer{}, s.payments.LiveOrderError(ctx, acct.ID, before.OrderID)
	}
	// A replay that made a new attempt answers created whatever that
	// attempt's outcome; the payment it carries says whether it is still
	// unknown.
	if ans.Kind == idempotency.KindAccepted {
		ans.Kind = idempotency.KindCreated
	}
	return ans, err
}

// replaying is an operator's replay on the money path.
type replaying struct {
	s             *Service
	acct          payment.Account
	before        *payment.Payment
	actor, reason string
}

// Prepare reconciles the payment's unresolved attempts first: a replay
// decides on what the provider proved, never on a guess.
func (rp *replaying) Prepare(ctx context.Context, _ bool) error {
	return rp.s.reconcile(ctx, rp.acct, rp.before.ID, rp.actor, rp.reason)
}

// Answer is the payment's answer, as for the merchant's own mutations.
func (rp *replaying) Answer(ctx context.Context, tx payment.Tx, p *payment.Payment, a *payment.Attempt) (idempotency.Answer, error) {
	return rp.s.payments.PaymentAnswer(ctx, tx, p, a)
}

// Start adopts a success reconciliation found, refuses while the outcome
// is unknown or the payment waits for the customer, and otherwise starts
// the next authorization attempt on the same payment.
func (rp *replaying) Start(ctx context.Context, tx payment.Tx, at payment.Reserved) (payment.Started, error) {
	p, err := tx.PaymentGetByIDForUpdate(ctx, rp.acct.ID, at.PaymentID)
	if err != nil {
		return payment.Started{}, err
	}
	switch p.Status {
	case payment.StatusAuthorized, payment.StatusCaptured:
		if rp.before.Status.Final() {
			return payment.Started{}, payment.Errorf(payment.CodeInvalidState, "the payment is already %s", p.Status)
		}
		// Reconciliation found the earlier attempt's success: adopt it.
		return payment.Done(p), tx.AuditInsert(ctx, payment.AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: at.Now,
			Actor: rp.actor, Action: "replay.adopted", Reason: rp.reason, Details: map[string]any{"status": string(p.Status)}})
	case payment.StatusProcessing, payment.StatusUnknown:
		return payment.Started{}, payment.Errorf(payment.CodeOutcomeUnknown, "the provider outcome of the last attempt is still unknown; no new attempt is made until it is known")
	case payment.StatusRequiresAction, payment.StatusPending:
		return payment.Started{}, payment.Errorf(payment.CodeInvalidState, "the payment is %s: the provider accepted it and it waits for the customer", p.Status)
	case payment.StatusCanceled:
		return payment.Started{}, payment.Errorf(payment.CodeInvalidState, "the payment is canceled")
	}
	return rp.newAttempt(ctx, tx, p, at)
}

// newAttempt moves a declined or failed payment back to processing with
// its next authorization attempt.
func (rp *replaying) newAttempt(ctx context.Context, tx payment.Tx, p *payment.Payment, at payment.Reserved) (payment.Started, error) {
	last, err := tx.AttemptLatestByPayment(ctx, p.ID, payment.OpAuthorize)
	if err != nil {
		return payment.Started{}, err
	}
	n, err := tx.AttemptNextNumber(ctx, rp.acct.ID, p.OrderID, payment.OpAuthorize)
	if err != nil {
		return payment.Started{}, err
	}
	// Once under the lock its own release was armed under, once after
	// the update, which may have waited for another payment to end.
	if err := payment.CheckOrderHeld(ctx, tx, rp.acct.ID, p.OrderID, payment.CodeOutcomeUnknown); err != nil {
		return payment.Started{}, err
	}
	from := p.Status
	p.Status, p.Attempt, p.UpdatedAt = payment.StatusProcessing, n, at.Now
	p.ProviderPaymentID, p.FailureCode, p.FailureMessage, p.AmountCaptured = "", "", "", 0
	if !payment.CanTransition(from, p.Status) {
		return payment.Started{}, payment.Errorf(payment.CodeInvalidState, "the payment is %s", from)
	}
	// The live-order index refuses this when the order has another
	// live payment.
	if err := tx.PaymentUpdateState(ctx, p); err != nil {
		return payment.Started{}, err
	}
	if err := payment.CheckOrderHeld(ctx, tx, rp.acct.ID, p.OrderID, payment.CodeOutcomeUnknown); err != nil {
		return payment.Started{}, err
	}
	a, err := rp.s.payments.InsertAuthorizeAttempt(ctx, tx, p, at.AttemptID, n, at.Now)
	if err != nil {
		return payment.Started{}, err
	}
	return payment.Send(p, a), rp.s.payments.Write(ctx, tx, payment.Change{Payment: p, From: from, Audit: payment.AuditEntry{Actor: rp.actor, Action: "replay.new_attempt", Reason: rp.reason,
		Details: map[string]any{"attempt_id": a.ID, "provider_key": a.ProviderKey, "replaces_attempt_id": last.ID, "replaces_provider_key": last.ProviderKey}}})
}
