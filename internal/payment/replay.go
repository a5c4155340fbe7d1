package payment

import (
	"context"
	"errors"

	"github.com/acmepay/payments/internal/idempotency"
)

type actorKey struct{}

// WithActor names who acts in the audit trail of the work done under ctx.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

type reasonKey struct{}

// WithReason gives an operator's reason to the audit entries of the work
// done under ctx.
func WithReason(ctx context.Context, reason string) context.Context {
	return context.WithValue(ctx, reasonKey{}, reason)
}

func reasonOf(ctx context.Context) string {
	r, _ := ctx.Value(reasonKey{}).(string)
	return r
}

func actorOf(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok {
		return a
	}
	return "api"
}

// Replay is an operator's replay of a stuck or failed order. It reconciles
// first; a success found at the provider is adopted without a new attempt;
// only once the provider proved the last attempt had no effect (declined,
// failed, not found) does it make a new attempt with the next provider key,
// audited with actor, reason and the attempt it replaces. While the outcome
// is still unknown it refuses: never a blind new attempt.
func (s *Service) Replay(ctx context.Context, accounts Accounts, reconcile Reconcile, key, paymentID, actor, reason string) (idempotency.Answer, error) {
	before, err := s.store.PaymentGetAny(ctx, paymentID)
	if err != nil {
		return idempotency.Answer{}, err
	}
	acct, err := accounts.Payer(ctx, before.AccountID)
	if err != nil {
		return idempotency.Answer{}, err
	}
	k, err := NewKey(acct.ID, idempotency.OpAdminReplay, key, paymentID, struct {
		PaymentID string `json:"payment_id"`
		Actor     string `json:"actor"`
		Reason    string `json:"reason"`
	}{paymentID, actor, reason})
	if err != nil {
		return idempotency.Answer{}, err
	}
	ans, err := s.Execute(WithActor(ctx, actor), acct, k, &replaying{answerPayment{s}, acct, before, actor, reason, reconcile})
	if errors.Is(err, ErrLiveOrderConflict) {
		return idempotency.Answer{}, s.LiveOrderError(ctx, acct.ID, before.OrderID)
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
	answerPayment
	acct          Account
	before        *Payment
	actor, reason string
	reconcile     Reconcile
}

// Reconcile reconciles the unresolved attempts of a payment nobody holds.
type Reconcile func(ctx context.Context, acct Account, paymentID, actor, reason string) error

// Prepare reconciles the payment's unresolved attempts first: a replay
// decides on what the provider proved, never on a guess.
func (rp *replaying) Prepare(ctx context.Context, _ bool) error {
	return rp.reconcile(ctx, rp.acct, rp.before.ID, rp.actor, rp.reason)
}

// Start adopts a success reconciliation found, refuses while the outcome
// is unknown or the payment waits for the customer, and otherwise starts
// the next authorization attempt on the same payment.
func (rp *replaying) Start(ctx context.Context, tx Tx, at Reserved) (Started, error) {
	p, err := tx.PaymentLock(ctx, rp.acct.ID, at.PaymentID)
	if err != nil {
		return Started{}, err
	}
	switch p.Status {
	case StatusAuthorized, StatusCaptured:
		if rp.before.Status.Final() {
			return Started{}, Errorf(CodeInvalidState, "the payment is already %s", p.Status)
		}
		// Reconciliation found the earlier attempt's success: adopt it.
		return Done(p), tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: at.Now,
			Actor: rp.actor, Action: "replay.adopted", Reason: rp.reason, Details: map[string]any{"status": string(p.Status)}})
	case StatusProcessing, StatusUnknown:
		return Started{}, Errorf(CodeOutcomeUnknown, "the provider outcome of the last attempt is still unknown; no new attempt is made until it is known")
	case StatusRequiresAction, StatusPending:
		return Started{}, Errorf(CodeInvalidState, "the payment is %s: the provider accepted it and it waits for the customer", p.Status)
	case StatusCanceled:
		return Started{}, Errorf(CodeInvalidState, "the payment is canceled")
	}
	return rp.newAttempt(ctx, tx, p, at)
}

// newAttempt moves a declined or failed payment back to processing with
// its next authorization attempt.
func (rp *replaying) newAttempt(ctx context.Context, tx Tx, p *Payment, at Reserved) (Started, error) {
	last, err := tx.AttemptLatest(ctx, p.ID, OpAuthorize)
	if err != nil {
		return Started{}, err
	}
	n, err := tx.NextAttemptNumber(ctx, rp.acct.ID, p.OrderID, OpAuthorize)
	if err != nil {
		return Started{}, err
	}
	// Once under the lock its own release was armed under, once after
	// the update, which may have waited for another payment to end.
	if err := CheckOrderHeld(ctx, tx, rp.acct.ID, p.OrderID, CodeOutcomeUnknown); err != nil {
		return Started{}, err
	}
	from := p.Status
	p.Status, p.Attempt, p.UpdatedAt = StatusProcessing, n, at.Now
	p.ProviderPaymentID, p.FailureCode, p.FailureMessage, p.AmountCaptured = "", "", "", 0
	if !CanTransition(from, p.Status) {
		return Started{}, Errorf(CodeInvalidState, "the payment is %s", from)
	}
	// The live-order index refuses this when the order has another
	// live payment.
	if err := tx.PaymentUpdate(ctx, p); err != nil {
		return Started{}, err
	}
	if err := CheckOrderHeld(ctx, tx, rp.acct.ID, p.OrderID, CodeOutcomeUnknown); err != nil {
		return Started{}, err
	}
	a, err := rp.s.InsertAuthorizeAttempt(ctx, tx, p, at.AttemptID, n, at.Now)
	if err != nil {
		return Started{}, err
	}
	return Send(p, a), rp.s.Write(ctx, tx, Change{Payment: p, From: from, Audit: AuditEntry{Actor: rp.actor, Action: "replay.new_attempt", Reason: rp.reason,
		Details: map[string]any{"attempt_id": a.ID, "provider_key": a.ProviderKey, "replaces_attempt_id": last.ID, "replaces_provider_key": last.ProviderKey}}})
}
