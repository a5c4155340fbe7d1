package payment

import (
	"context"
	"errors"
	"strings"
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
}

// Now is the service's clock, for callers that bound their work in time.
func (s *Service) Now() time.Time { return s.clock() }

// ClaimUnresolved leases up to limit attempts whose outcome is unknown, or
// whose holder's lease expired, not touched since updatedBefore. Leases and
// SKIP LOCKED let any number of reconcilers run at once without doing the
// same work twice. A pass keeps one updatedBefore throughout, so an attempt
// it examined (which bumps updated_at) is not claimed, and so leased for
// nothing, again in the same pass.
func (s *Service) ClaimUnresolved(ctx context.Context, updatedBefore time.Time, limit int) ([]*Attempt, error) {
	now := s.clock()
	return s.store.AttemptsClaim(ctx, updatedBefore, now, now.Add(s.lease), limit)
}

// ReconcileAttempt resolves a claimed attempt by asking the provider, never
// by a new charge, and records the resolution with its audit entry and
// event. The client's key, if it is waiting on this attempt, is completed
// with the answer it will replay.
func (s *Service) ReconcileAttempt(ctx context.Context, acct Account, a *Attempt, actor, reason string) (Resolution, error) {
	p, err := s.store.PaymentGet(ctx, acct.ID, a.PaymentID)
	if err != nil {
		return Resolution{}, err
	}
	out := s.call(ctx, acct, p, a, true)
	res := Resolution{AttemptID: a.ID, Operation: a.Operation}
	err = s.settle(ctx, a, func(ctx context.Context, tx Tx) error {
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
		stored, err := s.record(ctx, tx, p, a.ID, out, actor, now)
		if err != nil {
			return err
		}
		if reason != "" || actor != "reconciler" {
			if err := tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now, Actor: actor,
				Action: "reconcile", Reason: reason, Details: map[string]any{"attempt_id": a.ID, "status": string(stored.Status)}}); err != nil {
				return err
			}
		}
		res.Resolved = stored.Status.Resolved()
		res.Status = string(p.Status)
		if stored.Operation == OpRefund {
			res.Status = "refunded"
			if stored.Status == AttemptFailed {
				res.Status = "refund_failed"
			}
		}
		if !res.Resolved || !hasKey || rec.State == idempotency.StateCompleted {
			return nil
		}
		return s.completeKey(ctx, tx, rec, p, stored, now)
	})
	return res, err
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
	if err := s.reconcileAll(ctx, acct, p.ID, actor, reason); err != nil {
		return nil, err
	}
	return s.store.PaymentGet(ctx, p.AccountID, p.ID)
}

func (s *Service) reconcileAll(ctx context.Context, acct Account, paymentID, actor, reason string) error {
	pending, err := s.store.AttemptsUnresolvedByPayment(ctx, paymentID)
	if err != nil {
		return err
	}
	for _, a := range pending {
		now := s.clock()
		claimed, err := s.store.AttemptClaim(ctx, a.ID, now, now.Add(s.lease))
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

// AdminView is a payment with its attempts and audit trail.
type AdminView struct {
	Payment  *Payment     `json:"payment"`
	Attempts []*Attempt   `json:"attempts"`
	Audit    []AuditEntry `json:"audit"`
}

// AdminGet returns a payment of any account with its attempts and audit.
func (s *Service) AdminGet(ctx context.Context, id string) (*AdminView, error) {
	p, err := s.store.PaymentGetAny(ctx, id)
	if err != nil {
		return nil, err
	}
	as, err := s.store.AttemptListByPayment(ctx, id)
	if err != nil {
		return nil, err
	}
	audit, err := s.store.AuditListByPayment(ctx, id)
	if err != nil {
		return nil, err
	}
	return &AdminView{Payment: p, Attempts: as, Audit: audit}, nil
}

// ListStuck returns payments of any account in the given statuses, not
// updated for olderThan, oldest first.
func (s *Service) ListStuck(ctx context.Context, statuses []Status, olderThan time.Duration, limit int) ([]*Payment, error) {
	return s.store.PaymentListStuck(ctx, statuses, s.clock().Add(-olderThan), limit)
}

// ParseStatuses reads a comma-separated status filter.
func ParseStatuses(v string) ([]Status, error) {
	var out []Status
	for _, part := range strings.Split(v, ",") {
		st := Status(strings.TrimSpace(part))
		switch st {
		case StatusProcessing, StatusUnknown, StatusAuthorized, StatusCaptured, StatusDeclined, StatusFailed, StatusCanceled:
			out = append(out, st)
		default:
			return nil, fieldError("status", "must be a comma-separated list of payment statuses")
		}
	}
	return out, nil
}

// completeKey stores the answer a waiting client key will replay.
func (s *Service) completeKey(ctx context.Context, tx Tx, rec idempotency.Record, p *Payment, a *Attempt, now time.Time) error {
	resp, err := s.respond(ctx, tx, p, a)
	if err != nil {
		return err
	}
	return tx.KeyComplete(ctx, rec.ID, resp.Status, resp.Body, now)
}
