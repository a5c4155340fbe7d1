package payment

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// FailureActionExpired is the failure code of a Pix or Boleto the customer
// did not pay before it expired.
const FailureActionExpired = "action_expired"

// Defaults of the polling schedule of payments that wait for the customer.
const (
	defaultWaitPoll       = time.Minute
	defaultWaitMaxBackoff = time.Hour
	// expiryGrace: the poll after expires_at comes this much later, so the
	// provider's clock has passed it too.
	expiryGrace = 5 * time.Second
)

// cancelRequest is a cancel attempt's stored request: what the provider is
// sent, and the status the payment had when the cancel was asked for
// (never sent).
type cancelRequest struct {
	provider.CancelRequest
	From Status `json:",omitempty"`
	// Release: the cancel of the intent of an attempt that ended declined
	// or failed, so it can no longer be paid (see release.go).
	Release bool `json:",omitempty"`
}

func readCancel(a *Attempt) cancelRequest {
	var r cancelRequest
	_ = json.Unmarshal(a.Request, &r)
	return r
}

// abandoned tells a cancel the service made because the payment expired.
func abandoned(a *Attempt) bool { return readCancel(a).Abandoned }

// movedOn tells whether a refused cancel showed the payment had moved on
// at the provider: paid, or authorized by a customer who completed 3-D
// Secure while the cancel was on its way.
func movedOn(p *Payment, a *Attempt) bool {
	return p.Status == StatusCaptured || (p.Status == StatusAuthorized && readCancel(a).From == StatusRequiresAction)
}

// ExpiredAtProvider tells an answer showing a Pix or Boleto the provider
// let lapse unpaid.
func (out Outcome) ExpiredAtProvider() bool {
	return out.FailureCode == provider.FailureExpired ||
		(out.Intent != nil && out.Intent.State == provider.IntentNeedsPaymentMethod && out.Intent.FailureCode == provider.FailureExpired)
}

// applyWaiting copies what the customer must do from the provider's intent.
func applyWaiting(p *Payment, in *provider.Intent) {
	if in == nil || p.Status != StatusRequiresAction {
		return
	}
	if in.ClientSecret != "" {
		p.ClientSecret = in.ClientSecret
	}
	if in.NextAction == nil {
		return
	}
	p.NextAction = in.NextAction
	var at string
	switch {
	case in.NextAction.PixQRCode != nil:
		at = in.NextAction.PixQRCode.ExpiresAt
	case in.NextAction.BoletoDetails != nil:
		at = in.NextAction.BoletoDetails.ExpiresAt
	}
	if t, err := time.Parse(time.RFC3339, at); err == nil {
		t = t.UTC()
		p.ActionExpiresAt = &t
		return
	}
	// The provider gave no expiry: the one the service asked for.
	switch p.PaymentMethod {
	case MethodPix:
		t := p.CreatedAt.Add(time.Duration(p.Options.ExpiresIn) * time.Second)
		p.ActionExpiresAt = &t
	case MethodBoleto:
		t := p.CreatedAt.AddDate(0, 0, int(p.Options.ExpiresIn))
		p.ActionExpiresAt = &t
	}
}

// waitingNext is when a waiting payment is next polled: with backoff from
// the first poll, never later than just after its expiry, and soon after
// it once it has expired (to cancel it at the provider).
func (s *Service) waitingNext(p *Payment, a *Attempt, now time.Time) *time.Time {
	return s.waitPolicy().next(p, a, now)
}

// waitPolicy is the polling schedule of payments that wait for the
// customer (WaitPoll, WaitMaxBackoff), as a value decide can use.
type waitPolicy struct {
	poll, maxBackoff time.Duration
}

func (s *Service) waitPolicy() waitPolicy {
	return waitPolicy{poll: s.waitPoll, maxBackoff: s.waitMaxBackoff}
}

func (w waitPolicy) next(p *Payment, a *Attempt, now time.Time) *time.Time {
	backoff := w.maxBackoff
	if a.ReconcileTries < 30 {
		backoff = min(w.poll<<a.ReconcileTries, w.maxBackoff)
	}
	t := now.Add(backoff)
	if e := p.ActionExpiresAt; e != nil && p.Status == StatusRequiresAction {
		due := e.Add(expiryGrace)
		switch {
		case now.Before(due) && t.After(due):
			t = due
		case !now.Before(due):
			t = now.Add(w.poll)
		}
	}
	return &t
}

// Expire cancels at the provider a payment that still requires action past
// its expiry, so that it can no longer be paid; the cancel's answer decides
// the payment (canceled action_expired, or, when the customer paid first,
// the provider's state). lapsed: the provider showed it expired, whatever
// this clock says. It reports the payment's status and whether a
// cancel was sent.
func (s *Service) Expire(ctx context.Context, acct Account, paymentID, actor string, lapsed bool) (Status, bool, error) {
	var (
		p *Payment
		a *Attempt
	)
	err := s.store.WithTx(ctx, func(tx Tx) error {
		now := s.clock()
		var err error
		p, err = tx.PaymentGetByIDForUpdate(ctx, acct.ID, paymentID)
		if err != nil {
			return err
		}
		due := p.ActionExpiresAt != nil && !now.Before(*p.ActionExpiresAt)
		if p.Status != StatusRequiresAction || p.ProviderPaymentID == "" || !(due || lapsed) {
			return nil
		}
		busy, err := tx.AttemptCountUnresolvedByPaymentOps(ctx, p.ID, OpCapture, OpCancel)
		if err != nil || busy > 0 {
			// A cancel already on its way decides it.
			return err
		}
		n, err := tx.AttemptNextNumber(ctx, acct.ID, p.OrderID, OpCancel)
		if err != nil {
			return err
		}
		req := cancelRequest{CancelRequest: provider.CancelRequest{IdempotencyKey: ProviderKey(p.OrderID, OpCancel, n),
			IntentID: p.ProviderPaymentID, Abandoned: true}, From: p.Status}
		if a, err = s.insertAttempt(ctx, tx, p, s.newID("att"), OpCancel, n, req, now); err != nil {
			return err
		}
		return tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now, Actor: actor,
			Action: "cancelar.requested", Reason: FailureActionExpired,
			Details: map[string]any{"attempt_id": a.ID, "provider_key": a.ProviderKey, "lapsed_at_provider": lapsed}})
	})
	if errors.Is(err, ErrAttemptNumberTaken) {
		return "", false, nil // a concurrent cancel took the number; the next poll looks again
	}
	if err != nil || a == nil {
		return "", false, err
	}
	out := s.CallProvider(ctx, acct, p, a, false)
	var st Status
	err = s.settleAttempt(ctx, a, func(ctx context.Context, tx Tx) error {
		p, err := tx.PaymentGetByIDForUpdate(ctx, acct.ID, paymentID)
		if err != nil {
			return err
		}
		if _, err := s.Apply(ctx, tx, p, a.ID, out, actor, s.clock()); err != nil {
			return err
		}
		st = p.Status
		return nil
	})
	return st, true, err
}

// closeWaiting resolves the waiting authorization of a payment that another
// operation (a cancel, its expiry) has made final, so nobody polls it.
func closeWaiting(ctx context.Context, tx Tx, p *Payment, now time.Time) error {
	a, err := tx.AttemptLatestByPayment(ctx, p.ID, OpAuthorize)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil || a.Status != AttemptWaiting {
		return err
	}
	a.Status, a.UpdatedAt, a.NextReconcileAt = AttemptSucceeded, now, nil
	return tx.AttemptUpdateOutcome(ctx, a)
}
