package payment

import (
	"context"
	"slices"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// Failover (CONTRACT §15): within the one create request, a payment moves
// to the next provider of its route only on an answer that proves its
// provider did nothing with the first send of the attempt's key: the
// request never reached it, or it refused the credentials before looking
// at the key. A decline is final, and anything in doubt (a timeout, 5xx,
// 429, a connection lost after the request was written) stays unknown for
// the reconciler, as with one provider.

// Failure codes of an attempt whose provider provably did nothing: the
// adapters set them with provider.AnswerUnreachable and
// provider.AnswerCredentials, and provider.Judge fails only a first send.
const (
	FailureProviderUnreachable    = provider.FailureUnreachable
	FailureProviderAuthentication = provider.FailureCredentials
)

// provedNothing: the outcome proves the provider did nothing with the
// attempt, which this request sent for the first time.
func provedNothing(w work, out Outcome) bool {
	return !w.recovered && out.Outcome == provider.Failed &&
		(out.FailureCode == FailureProviderUnreachable || out.FailureCode == FailureProviderAuthentication)
}

// stillOurs: the stored attempt is unresolved and still under the lease
// this request took. A request that outlived its lease has a twin that
// may have taken the attempt over and re-sent its key: the proof of this
// send says nothing of that one, so there is no failover.
func stillOurs(mine, stored *Attempt) bool {
	if stored.Status.Resolved() || mine.LeaseExpiresAt == nil || stored.LeaseExpiresAt == nil {
		return false
	}
	return stored.LeaseExpiresAt.Equal(*mine.LeaseExpiresAt)
}

// failingOver is a Mutation that may send its request to another
// provider.
type failingOver interface {
	// nextProvider names the provider to try after p's current one; ""
	// when none is left, or no time is.
	nextProvider(p *Payment) string
}

// nextProvider is the route's next provider after the payment's, while
// the request has time for another call and its answer.
func (c *creating) nextProvider(p *Payment) string {
	if !c.deadline.IsZero() && time.Until(c.deadline) < c.s.providerTimeout+c.s.settleTimeout {
		return ""
	}
	i := slices.Index(c.route, p.Provider)
	if i < 0 {
		return ""
	}
	for _, name := range c.route[i+1:] {
		if c.s.circuitAllows(name) {
			return name
		}
	}
	return ""
}

// failOverAtOnce is failOver in one statement, for the usual case: the
// request's own first send proved nothing, and the payment, its key and
// the attempt are as the request left them, which the statement checks
// under the locks. nil when it did not hold (a twin, the reconciler or a
// webhook moved something): the caller then reads under the locks and
// decides as ever.
func (s *Service) failOverAtOnce(ctx context.Context, tx Tx, w work, out Outcome, now time.Time) (*work, error) {
	fo, ok := w.mutation.(failingOver)
	if !ok || !provedNothing(w, out) {
		return nil, nil
	}
	next := fo.nextProvider(w.payment)
	if next == "" {
		return nil, nil
	}
	p := *w.payment
	n := p.Attempt + 1
	p.Provider, p.Attempt, p.UpdatedAt, p.Version = next, n, now, p.Version+1
	na, err := s.newAuthorizeAttempt(&p, s.newID("att"), n, now)
	if err != nil {
		return nil, err
	}
	ok, err = tx.PaymentFailOver(ctx, FailOver{Scope: w.scope, Payment: w.payment, Failed: w.attempt,
		FailureCode: out.FailureCode, FailureMessage: out.FailureMessage, Next: na, Now: now,
		Audit: AuditEntry{Actor: w.actor, Details: failoverDetails(w.payment.Provider, next, w.attempt.ID, out.FailureCode, na)}})
	if err != nil || !ok {
		return nil, err
	}
	return &work{scope: w.scope, payment: &p, attempt: na, mutation: w.mutation, actor: w.actor}, nil
}

// failoverDetails are the audit details of a failover.
func failoverDetails(from, to, failedID, failureCode string, na *Attempt) map[string]any {
	return map[string]any{"from": from, "to": to, "failed_attempt_id": failedID, "failure_code": failureCode,
		"attempt_id": na.ID, "provider_key": na.ProviderKey}
}

// failOver runs in transaction 2 instead of recording a final outcome: the
// attempt is failed with the code that proves nothing happened, and the
// payment's next attempt, {order_id}:autorizar-v{n+1}, goes to the next
// provider; the client key now waits on it. A crash right after it leaves
// the new attempt processing under the key's lease, recovered like any
// other at its own provider.
func (s *Service) failOver(ctx context.Context, tx Tx, keyID int64, w work, p *Payment, a *Attempt, out Outcome, next string, now time.Time) (*work, error) {
	a.Status, a.FailureCode, a.FailureMessage, a.UpdatedAt = AttemptFailed, out.FailureCode, out.FailureMessage, now
	if err := tx.AttemptUpdateOutcome(ctx, a); err != nil {
		return nil, err
	}
	n, err := tx.AttemptNextNumber(ctx, p.AccountID, p.OrderID, OpAuthorize)
	if err != nil {
		return nil, err
	}
	from := p.Provider
	p.Provider, p.Attempt, p.UpdatedAt = next, n, now
	if err := tx.PaymentMoveProvider(ctx, p, now); err != nil {
		return nil, err
	}
	p.Version++
	na, err := s.InsertAuthorizeAttempt(ctx, tx, p, s.newID("att"), n, now)
	if err != nil {
		return nil, err
	}
	if err := tx.IdempotencyKeyMoveAttempt(ctx, keyID, na.ID, *na.LeaseExpiresAt, now); err != nil {
		return nil, err
	}
	err = tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now, Actor: w.actor,
		Action: "payment.failover", Details: failoverDetails(from, next, a.ID, a.FailureCode, na)})
	if err != nil {
		return nil, err
	}
	return &work{scope: w.scope, payment: p, attempt: na, mutation: w.mutation, actor: w.actor}, nil
}
