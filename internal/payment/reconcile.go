package payment

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
)

// Resolution is what reconciling one attempt concluded.
type Resolution struct {
	AttemptID string
	Operation Operation
	// Status is the payment's status after it (for a refund: refunded or
	// refund_failed); Resolved is false while the outcome is still unknown.
	Status   string
	Resolved bool
	// ByOther: another path resolved the attempt first.
	ByOther bool
	// Waiting: the payment waits for the customer or the provider; the
	// attempt is polled again on its own schedule.
	Waiting bool
}

// Now is the service's clock, for callers that bound their work in time.
func (s *Service) Now() time.Time { return s.clock() }

// Due says which unresolved attempts a reconciliation pass may claim.
type Due struct {
	// UpdatedBefore: an attempt never claimed is due once untouched since
	// then (RECONCILE_AFTER before the pass began).
	UpdatedBefore time.Time
	// Before: an attempt claimed before is due when its next reconcile
	// time came before this (the pass's start, so that one pass never
	// claims an attempt twice).
	Before time.Time
}

// ClaimNext leases the unresolved attempt that has waited longest among
// those due and sets its next reconcile time to nextDue(claims so far).
// ErrNotFound when none is due. One attempt per claim, with a lease that
// covers the provider call and the recording of its answer, so a lease
// never runs out on work still waiting in a batch; SKIP LOCKED lets any
// number of reconcilers claim at once without doing the same work twice.
func (s *Service) ClaimNext(ctx context.Context, due Due, nextDue func(tries int) time.Time) (*Attempt, error) {
	now := s.clock()
	return s.store.AttemptClaimNext(ctx, due, now, now.Add(s.claimLease()), nextDue)
}

// claimLease is how long a recovery claim holds an attempt: at least
// IN_PROGRESS_LEASE, and always the whole provider call (which call caps at
// the lease) plus one try at recording its answer. A recording that needs
// more tries happens after the send it guards, and the provider replays a
// key re-sent by whoever claims next.
func (s *Service) claimLease() time.Duration {
	return max(s.lease, s.providerTimeout+s.settleTimeout+time.Second)
}

// AttemptsNeedingAttention counts attempts unresolved for longer than
// RECONCILE_ALERT_AFTER.
func (s *Service) AttemptsNeedingAttention(ctx context.Context) (int, error) {
	return s.store.AttemptsNeedingAttention(ctx, s.clock().Add(-s.alertAfter))
}

// NeedsAttention tells whether an attempt has been unresolved for longer
// than RECONCILE_ALERT_AFTER.
func (s *Service) NeedsAttention(a *Attempt) bool {
	return !a.Status.Resolved() && s.clock().Sub(a.CreatedAt) > s.alertAfter
}

// ReconcileAttempt resolves a claimed attempt by asking the provider, never
// by a new charge, and records the resolution with its audit entry and
// event. The client's key, if it is waiting on this attempt, is completed
// with the answer it will replay.
func (s *Service) ReconcileAttempt(ctx context.Context, acct Account, a *Attempt, actor, reason string) (Resolution, error) {
	res := Resolution{AttemptID: a.ID, Operation: a.Operation}
	if a.LeaseExpiresAt == nil || !s.clock().Before(*a.LeaseExpiresAt) {
		// The claim's lease ran out before the call could start: another
		// reconciler may hold the attempt now, so send nothing and record
		// nothing; the attempt stays due.
		s.log.WarnContext(ctx, "claim expired before the provider call; nothing sent",
			slog.String("attempt_id", a.ID), slog.String("payment_id", a.PaymentID))
		return res, nil
	}
	p, err := s.store.PaymentGet(ctx, acct.ID, a.PaymentID)
	if err != nil {
		return Resolution{}, err
	}
	out := s.CallProvider(ctx, acct, p, a, true)
	var settled *Payment
	err = s.settleAttempt(ctx, a, func(ctx context.Context, tx Tx) error {
		now := s.clock()
		rec, err := tx.KeyLockByAttempt(ctx, a.ID)
		hasKey := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		p, err := tx.PaymentLock(ctx, acct.ID, a.PaymentID)
		if err != nil {
			return err
		}
		cur, err := tx.AttemptGet(ctx, a.ID)
		if err != nil {
			return err
		}
		// Another path (a webhook, the client's retry) resolved it while
		// the provider was being asked: that path owns the resolution.
		res.ByOther = cur.Status.Resolved()
		stored, err := s.Apply(ctx, tx, p, a.ID, out, actor, now)
		if err != nil {
			return err
		}
		if a.Operation == OpAuthorize {
			settled = p
		}
		if reason != "" || actor != "reconciler" {
			if err := tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now, Actor: actor,
				Action: "reconcile", Reason: reason, Details: map[string]any{"attempt_id": a.ID, "status": string(stored.Status)}}); err != nil {
				return err
			}
		}
		// An unknown outcome learned to be waiting is resolved into
		// requires_action or pending; a waiting one still waiting is not.
		res.Waiting = stored.Status == AttemptWaiting
		res.Resolved = stored.Status.Resolved() || (res.Waiting && a.Status != AttemptWaiting)
		res.Status = string(p.Status)
		if stored.Operation == OpRefund {
			res.Status = "refunded"
			if stored.Status == AttemptFailed {
				res.Status = "refund_failed"
			}
		}
		if !stored.Status.Answered() || !hasKey || rec.State == idempotency.StateCompleted {
			return nil
		}
		return s.CompleteKey(ctx, tx, rec, p, stored, now)
	})
	if err == nil {
		s.SendReleases(ctx, acct, settled, actor)
	}
	if err != nil || !res.Waiting || res.ByOther {
		return res, err
	}
	// A Pix or Boleto past its expiry that the provider still shows open is
	// canceled there, so it can no longer be paid, before it ends here.
	if st, expired, err := s.Expire(ctx, acct, a.PaymentID, actor, expiredAtProvider(out)); err != nil {
		return res, err
	} else if expired {
		res.Status, res.Waiting, res.Resolved = string(st), false, st.Final()
	}
	return res, nil
}

// ReconcilePayment reconciles, now, every unresolved attempt of a payment
// that nobody holds, for an operator.
func (s *Service) ReconcilePayment(ctx context.Context, accounts Accounts, paymentID, actor, reason string) (*Payment, error) {
	p, err := s.store.PaymentGetAny(ctx, paymentID)
	if err != nil {
		return nil, err
	}
	acct, err := accounts.Payer(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	if err := s.ReconcileAll(ctx, acct, p.ID, actor, reason); err != nil {
		return nil, err
	}
	return s.store.PaymentGet(ctx, p.AccountID, p.ID)
}

func (s *Service) ReconcileAll(ctx context.Context, acct Account, paymentID, actor, reason string) error {
	pending, err := s.store.AttemptsUnresolvedByPayment(ctx, paymentID)
	if err != nil {
		return err
	}
	for _, a := range pending {
		now := s.clock()
		claimed, err := s.store.AttemptClaim(ctx, a.ID, now, now.Add(s.claimLease()))
		if errors.Is(err, ErrNotFound) {
			continue // held by a live request or another reconciler
		}
		if err != nil {
			return err
		}
		if _, err := s.ReconcileAttempt(ctx, acct, claimed, actor, reason); err != nil {
			return err
		}
	}
	return nil
}

// CompleteKey stores the answer a waiting client key will replay.
func (s *Service) CompleteKey(ctx context.Context, tx Tx, rec idempotency.Record, p *Payment, a *Attempt, now time.Time) error {
	var m answerer = answerPayment{s}
	if rec.Scope.Operation == idempotency.OpAdminResolve {
		m = answerResolution{s: s}
	}
	ans, err := m.Answer(ctx, tx, p, a)
	if err != nil {
		return err
	}
	return tx.KeyComplete(ctx, rec.ID, ans, now)
}
