package payment

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
)

type actorKey struct{}

// withActor names who acts in the audit trail of the work done under ctx.
func withActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

type reasonKey struct{}

// withReason gives an operator's reason to the audit entries of the work
// done under ctx.
func withReason(ctx context.Context, reason string) context.Context {
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
func (s *Service) Replay(ctx context.Context, accounts Accounts, key, paymentID, actor, reason string) (idempotency.Response, error) {
	before, err := s.store.PaymentGetAny(ctx, paymentID)
	if err != nil {
		return idempotency.Response{}, err
	}
	acct, err := accounts.Payer(ctx, before.AccountID)
	if err != nil {
		return idempotency.Response{}, err
	}
	op := idempotency.OpAdminReplay
	fp, err := idempotency.Fingerprint(op, struct {
		PaymentID string `json:"payment_id"`
		Actor     string `json:"actor"`
		Reason    string `json:"reason"`
	}{paymentID, actor, reason})
	if err != nil {
		return idempotency.Response{}, err
	}
	scope := idempotency.Scope{AccountID: acct.ID, Operation: op, KeyHash: idempotency.HashKey(key)}
	// A replay of a replay (same key) is answered from the key alone.
	if rec, err := s.store.KeyGet(ctx, scope); err == nil {
		if d := idempotency.Decide(rec, fp, s.clock()); d != idempotency.Recover {
			return s.answer(ctx, rec, d)
		}
	}
	if err := s.reconcileAll(ctx, acct, paymentID, actor, reason); err != nil {
		return idempotency.Response{}, err
	}
	ctx = withActor(ctx, actor)
	resp, err := s.execute(ctx, acct, scope, fp, paymentID, ReadAhead{},
		func(ctx context.Context, tx Tx, now time.Time, paymentID, attemptID string) (*Payment, *Attempt, error) {
			p, err := tx.PaymentLock(ctx, acct.ID, paymentID)
			if err != nil {
				return nil, nil, err
			}
			switch p.Status {
			case StatusAuthorized, StatusCaptured:
				if before.Status.Final() {
					return nil, nil, Errorf(CodeInvalidState, "the payment is already %s", p.Status)
				}
				// Reconciliation found the earlier attempt's success: adopt it.
				return p, nil, tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now,
					Actor: actor, Action: "replay.adopted", Reason: reason, Details: map[string]any{"status": string(p.Status)}})
			case StatusProcessing, StatusUnknown:
				return nil, nil, Errorf(CodeOutcomeUnknown, "the provider outcome of the last attempt is still unknown; no new attempt is made until it is known")
			case StatusRequiresAction, StatusPending:
				return nil, nil, Errorf(CodeInvalidState, "the payment is %s: the provider accepted it and it waits for the customer", p.Status)
			case StatusCanceled:
				return nil, nil, Errorf(CodeInvalidState, "the payment is canceled")
			}
			last, err := tx.AttemptLatest(ctx, p.ID, OpAuthorize)
			if err != nil {
				return nil, nil, err
			}
			n, err := tx.NextAttemptNumber(ctx, acct.ID, p.OrderID, OpAuthorize)
			if err != nil {
				return nil, nil, err
			}
			// Once under the lock its own release was armed under, once after
			// the update, which may have waited for another payment to end.
			if err := checkOrderHeld(ctx, tx, acct.ID, p.OrderID, CodeOutcomeUnknown); err != nil {
				return nil, nil, err
			}
			from := p.Status
			p.Status, p.Attempt, p.UpdatedAt = StatusProcessing, n, now
			p.ProviderPaymentID, p.FailureCode, p.FailureMessage, p.AmountCaptured = "", "", "", 0
			if !CanTransition(from, p.Status) {
				return nil, nil, Errorf(CodeInvalidState, "the payment is %s", from)
			}
			// The live-order index refuses this when the order has another
			// live payment.
			if err := tx.PaymentUpdate(ctx, p); err != nil {
				return nil, nil, err
			}
			if err := checkOrderHeld(ctx, tx, acct.ID, p.OrderID, CodeOutcomeUnknown); err != nil {
				return nil, nil, err
			}
			a, err := s.insertAuthorizeAttempt(ctx, tx, p, attemptID, n, now)
			if err != nil {
				return nil, nil, err
			}
			return p, a, s.changed(ctx, tx, p, "", from, actor, "replay.new_attempt", reason, map[string]any{
				"attempt_id": a.ID, "provider_key": a.ProviderKey, "replaces_attempt_id": last.ID, "replaces_provider_key": last.ProviderKey})
		})
	if errors.Is(err, ErrLiveOrderConflict) {
		return idempotency.Response{}, s.liveOrderError(ctx, acct.ID, before.OrderID)
	}
	// A replay that made a new attempt answers 201 whatever that attempt's
	// outcome; the payment it carries says whether it is still unknown.
	if resp.Status == http.StatusAccepted {
		resp.Status = http.StatusCreated
	}
	return resp, err
}
