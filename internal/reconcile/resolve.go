package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
)

// Store is what reconciliation reads and claims.
type Store interface {
	PaymentGetByID(ctx context.Context, accountID, id string) (*payment.Payment, error)
	// PaymentGetAnyAccount reads a payment of any account (operators).
	PaymentGetAnyAccount(ctx context.Context, id string) (*payment.Payment, error)
	AttemptListUnresolvedByPayment(ctx context.Context, paymentID string) ([]*payment.Attempt, error)
	// AttemptClaimByID leases one unresolved attempt if nobody holds it.
	AttemptClaimByID(ctx context.Context, id string, now, leaseUntil time.Time) (*payment.Attempt, error)
	// AttemptClaimNext leases the unresolved attempt nobody holds that has
	// been due longest, counts the claim and sets its next reconcile time to
	// nextDue(the claims so far, this one included); payment.ErrNotFound
	// when none is due.
	AttemptClaimNext(ctx context.Context, due Due, now, leaseUntil time.Time, nextDue func(tries int) time.Time) (*payment.Attempt, error)
	// AttemptCountNeedingAttentionByProvider counts unresolved attempts
	// created before createdBefore, by provider.
	AttemptCountNeedingAttentionByProvider(ctx context.Context, createdBefore time.Time) (map[string]int, error)
}

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

// Resolution is what reconciling one attempt concluded.
type Resolution struct {
	AttemptID string
	Operation payment.Operation
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

// ClaimNext leases the unresolved attempt that has waited longest among
// those due and sets its next reconcile time to nextDue(claims so far).
// payment.ErrNotFound when none is due. One attempt per claim, with a lease
// that covers the provider call and the recording of its answer, so a lease
// never runs out on work still waiting in a batch; SKIP LOCKED lets any
// number of reconcilers claim at once without doing the same work twice.
func (r *Reconciler) ClaimNext(ctx context.Context, due Due, nextDue func(tries int) time.Time) (*payment.Attempt, error) {
	now := r.cfg.Now()
	return r.cfg.Store.AttemptClaimNext(ctx, due, now, now.Add(r.cfg.Payments.ClaimLease()), nextDue)
}

// Attempt resolves a claimed attempt by asking the provider, never by a
// new charge, and records the resolution with its audit entry and event.
// The client's key, if it is waiting on this attempt, is completed with the
// answer it will replay.
func (r *Reconciler) Attempt(ctx context.Context, acct payment.Account, a *payment.Attempt, actor, reason string) (Resolution, error) {
	res := Resolution{AttemptID: a.ID, Operation: a.Operation}
	if a.LeaseExpiresAt == nil || !r.cfg.Now().Before(*a.LeaseExpiresAt) {
		// The claim's lease ran out before the call could start: another
		// reconciler may hold the attempt now, so send nothing and record
		// nothing; the attempt stays due.
		r.cfg.Logger.WarnContext(ctx, "claim expired before the provider call; nothing sent",
			slog.String("attempt_id", a.ID), slog.String("payment_id", a.PaymentID))
		return res, nil
	}
	p, err := r.cfg.Store.PaymentGetByID(ctx, acct.ID, a.PaymentID)
	if err != nil {
		return Resolution{}, err
	}
	out := r.cfg.Payments.CallProvider(ctx, acct, p, a, true)
	rec, err := r.cfg.Payments.SettleClaimed(ctx, acct, a, out, actor, func(ctx context.Context, tx payment.Tx, rec payment.Recorded) error {
		if reason == "" && actor == "reconciler" {
			return nil
		}
		return tx.AuditInsert(ctx, payment.AuditEntry{AccountID: rec.Payment.AccountID, PaymentID: rec.Payment.ID,
			At: rec.At, Actor: actor, Action: "reconcile", Reason: reason,
			Details: map[string]any{"attempt_id": a.ID, "status": string(rec.Attempt.Status)}})
	})
	if err != nil {
		return res, err
	}
	res = resolutionOf(a, rec)
	if !res.Waiting || res.ByOther {
		return res, nil
	}
	// A Pix or Boleto past its expiry that the provider still shows open is
	// canceled there, so it can no longer be paid, before it ends here.
	st, expired, err := r.cfg.Payments.Expire(ctx, acct, a.PaymentID, actor, out.ExpiredAtProvider())
	if err != nil {
		return res, err
	}
	if expired {
		res.Status, res.Waiting, res.Resolved = string(st), false, st.Final()
	}
	return res, nil
}

// resolutionOf reads what recording a claimed attempt's outcome concluded.
func resolutionOf(claimed *payment.Attempt, rec payment.Recorded) Resolution {
	stored := rec.Attempt
	res := Resolution{AttemptID: claimed.ID, Operation: claimed.Operation, ByOther: rec.ByOther}
	// An unknown outcome learned to be waiting is resolved into
	// requires_action or pending; a waiting one still waiting is not.
	res.Waiting = stored.Status == payment.AttemptWaiting
	res.Resolved = stored.Status.Resolved() || (res.Waiting && claimed.Status != payment.AttemptWaiting)
	res.Status = string(rec.Payment.Status)
	if stored.Operation == payment.OpRefund {
		res.Status = "refunded"
		if stored.Status == payment.AttemptFailed {
			res.Status = "refund_failed"
		}
	}
	return res
}

// Payment reconciles, now, every unresolved attempt of a payment of any
// account that nobody holds, for an operator.
func (r *Reconciler) Payment(ctx context.Context, paymentID, actor, reason string) (*payment.Payment, error) {
	p, err := r.cfg.Store.PaymentGetAnyAccount(ctx, paymentID)
	if err != nil {
		return nil, err
	}
	ctx = logging.WithPayment(ctx, p.AccountID, p.ID)
	acct, err := r.cfg.Accounts.Merchant(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	if err := r.All(ctx, acct, p.ID, actor, reason); err != nil {
		return nil, err
	}
	return r.cfg.Store.PaymentGetByID(ctx, p.AccountID, p.ID)
}

// All reconciles every unresolved attempt of one payment that nobody
// holds: an operator's replay decides on what this learns.
func (r *Reconciler) All(ctx context.Context, acct payment.Account, paymentID, actor, reason string) error {
	pending, err := r.cfg.Store.AttemptListUnresolvedByPayment(ctx, paymentID)
	if err != nil {
		return err
	}
	for _, a := range pending {
		now := r.cfg.Now()
		claimed, err := r.cfg.Store.AttemptClaimByID(ctx, a.ID, now, now.Add(r.cfg.Payments.ClaimLease()))
		if errors.Is(err, payment.ErrNotFound) {
			continue // held by a live request or another reconciler
		}
		if err != nil {
			return err
		}
		if _, err := r.Attempt(ctx, acct, claimed, actor, reason); err != nil {
			return err
		}
	}
	return nil
}

// AttemptCountNeedingAttention counts attempts unresolved for longer than
// RECONCILE_ALERT_AFTER.
func (r *Reconciler) AttemptCountNeedingAttention(ctx context.Context) (int, error) {
	byProvider, err := r.AttemptCountNeedingAttentionByProvider(ctx)
	n := 0
	for _, c := range byProvider {
		n += c
	}
	return n, err
}

// AttemptCountNeedingAttentionByProvider is AttemptCountNeedingAttention
// by provider; a provider with none is absent.
func (r *Reconciler) AttemptCountNeedingAttentionByProvider(ctx context.Context) (map[string]int, error) {
	return r.cfg.Store.AttemptCountNeedingAttentionByProvider(ctx, r.cfg.Now().Add(-r.cfg.AlertAfter))
}

// NeedsAttention tells whether an attempt has been unresolved for longer
// than RECONCILE_ALERT_AFTER.
func (r *Reconciler) NeedsAttention(a *payment.Attempt) bool {
	return !a.Status.Resolved() && r.cfg.Now().Sub(a.CreatedAt) > r.cfg.AlertAfter
}
