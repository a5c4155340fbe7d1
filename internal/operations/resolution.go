package operations

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/payment"
)

// ResolveRequest is an operator's resolve request.
type ResolveRequest struct {
	Actor  string
	Reason string
	Action payment.ResolveAction
}

var errHeld = payment.Errorf(payment.CodeInvalidState, "the discrepancy is resolved, or another resolution of it is in progress")

// Resolve closes a discrepancy with an action, on the idempotent path of
// every mutation (CONTRACT §14): note records it; adopt_provider_state
// makes the payment say what the provider says now; refund returns what
// the provider still holds through the payment's refund path. The
// discrepancy is held for the whole resolution: claimed before any
// provider call, then held by the refund in flight until it settles, so of
// two racing resolves exactly one acts. A refund that succeeded resolves
// it (ok); a refused one leaves it open (refused, provider_rejected); one
// in doubt leaves it open and held (accepted) until the refund is settled.
func (s *Service) Resolve(ctx context.Context, key, id string, r ResolveRequest) (idempotency.Answer, error) {
	switch r.Action {
	case payment.ResolveAdopt, payment.ResolveRefund, payment.ResolveNote:
	default:
		return idempotency.Answer{}, payment.InvalidField("action", "must be adopt_provider_state, refund or note")
	}
	dsc, err := s.store.DiscrepancyGetByID(ctx, id)
	if err != nil {
		return idempotency.Answer{}, err
	}
	acct, err := s.accounts.Merchant(ctx, dsc.AccountID)
	if err != nil {
		return idempotency.Answer{}, err
	}
	k, err := payment.NewKey(acct.ID, idempotency.OpAdminResolve, key, dsc.PaymentID, struct {
		DiscrepancyID string                `json:"discrepancy_id"`
		Action        payment.ResolveAction `json:"action"`
		Actor         string                `json:"actor"`
		Reason        string                `json:"reason"`
	}{id, r.Action, r.Actor, r.Reason})
	if err != nil {
		return idempotency.Answer{}, err
	}
	rs := &resolving{s: s, id: id, acct: acct, paymentID: dsc.PaymentID, req: r, keyHash: k.Scope.KeyHash}
	ans, err := s.payments.Execute(payment.WithReason(payment.WithActor(ctx, r.Actor), r.Reason), acct, k, rs)
	if err != nil && rs.claimed {
		// Nothing was started: another resolve may act at once, not only
		// once the claim has lapsed. A started refund already ended it.
		if rerr := s.store.DiscrepancyReleaseClaim(context.WithoutCancel(ctx), id, rs.keyHash); rerr != nil {
			s.log.WarnContext(ctx, "resolve: claim not released; it lapses with its lease", slog.String("discrepancy_id", id),
				slog.String("error", rerr.Error()))
		}
	}
	return ans, err
}

// resolving is one resolve request on the money path; its answer is the
// core's (the core also answers it when another path settles the refund).
type resolving struct {
	s         *Service
	id        string
	acct      payment.Account
	paymentID string
	req       ResolveRequest
	keyHash   []byte
	st        providerState
	asked     bool
	claimed   bool
}

// Prepare claims the discrepancy, then asks the provider what Start needs:
// a discrepancy another resolve holds gets 409 before any provider call.
// A key being recovered has its refund in flight already.
func (rs *resolving) Prepare(ctx context.Context, recovering bool) error {
	if recovering {
		return nil
	}
	s := rs.s
	now := s.now()
	if _, err := s.store.DiscrepancyClaim(ctx, rs.id, rs.keyHash, now.Add(s.lease), now); errors.Is(err, payment.ErrNotFound) {
		return errHeld
	} else if err != nil {
		return err
	}
	rs.claimed = true
	if rs.req.Action == payment.ResolveNote {
		return nil
	}
	p, err := s.payments.Get(ctx, rs.acct.ID, rs.paymentID)
	if err != nil {
		return err
	}
	st, err := rs.s.fetch(ctx, rs.acct, p)
	if err != nil || len(st.failed) > 0 {
		return payment.Errorf(payment.CodeUnavailable, "the provider could not be asked about the payment")
	}
	if st.intent == nil {
		return payment.Errorf(payment.CodeInvalidState, "the provider has no payment for this discrepancy")
	}
	rs.st, rs.asked = st, true
	return nil
}

// Start runs in the transaction that reserves the key: under the
// payment's and the discrepancy's locks it checks that this resolve still
// holds it, then acts. A refund is only started here; note and adopt
// complete at once.
func (rs *resolving) Start(ctx context.Context, tx payment.Tx, at payment.Reserved) (payment.Started, error) {
	dtx, ok := tx.(payment.DiscrepancyTx)
	if !ok {
		return payment.Started{}, errors.New("payment: the store cannot resolve discrepancies")
	}
	// Lock order everywhere: key, payment, discrepancy (as settling a
	// refund takes them).
	p, err := tx.PaymentGetByIDForUpdate(ctx, rs.acct.ID, at.PaymentID)
	if err != nil {
		return payment.Started{}, err
	}
	cur, err := dtx.DiscrepancyGetByIDForUpdate(ctx, rs.id)
	if err != nil {
		return payment.Started{}, err
	}
	claimedByOther := cur.ClaimedUntil != nil && at.Now.Before(*cur.ClaimedUntil) && !bytes.Equal(cur.ClaimKeyHash, rs.keyHash)
	if cur.Status != payment.DiscrepancyOpen || cur.Held() || claimedByOther {
		return payment.Started{}, errHeld
	}
	if rs.req.Action != payment.ResolveNote && !rs.asked {
		return payment.Started{}, payment.Errorf(payment.CodeUnavailable, "the resolution was not prepared; retry")
	}
	details := map[string]any{"discrepancy_id": cur.ID, "kind": string(cur.Kind), "resolution": string(rs.req.Action)}
	switch rs.req.Action {
	case payment.ResolveRefund:
		a, err := rs.startRefund(ctx, tx, dtx, p, cur, at.AttemptID, details, at.Now)
		return payment.Send(p, a), err
	case payment.ResolveAdopt:
		err := rs.s.adopt(ctx, tx, p, cur.Kind, rs.st, rs.req, details, at.Now)
		if errors.Is(err, payment.ErrLiveOrderConflict) {
			return payment.Started{}, payment.Errorf(payment.CodeInvalidState, "the order has another live payment; the provider's state cannot be adopted")
		}
		if err != nil {
			return payment.Started{}, err
		}
	}
	if err := tx.AuditInsert(ctx, payment.AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: at.Now,
		Actor: rs.req.Actor, Action: "discrepancy.resolved", Reason: rs.req.Reason, Details: details}); err != nil {
		return payment.Started{}, err
	}
	_, err = dtx.DiscrepancyResolve(ctx, rs.id, rs.req.Actor, rs.req.Action, at.Now)
	return payment.Done(p), err
}

// startRefund writes the refund of what the provider still holds, on the
// payment's refund path, and ties it to the discrepancy: the payment itself
// is left as it is until the refund succeeds.
func (rs *resolving) startRefund(ctx context.Context, tx payment.Tx, dtx payment.DiscrepancyTx, p *payment.Payment, cur *payment.Discrepancy, attemptID string,
	details map[string]any, now time.Time) (*payment.Attempt, error) {
	in := rs.st.intent
	amount := in.AmountReceived - rs.st.refunded
	if intentStatus(in) != payment.StatusCaptured || amount <= 0 {
		return nil, payment.Errorf(payment.CodeInvalidState, "the provider holds nothing to refund for this payment")
	}
	r, a, err := rs.s.payments.StartRefund(ctx, tx, p, attemptID, amount, in.ID, now)
	if err != nil {
		return nil, err
	}
	shown, err := json.Marshal(payment.ProviderShown{IntentID: in.ID, AmountCaptured: in.AmountReceived, AmountRefunded: rs.st.refunded})
	if err != nil {
		return nil, err
	}
	res := payment.DiscrepancyResolution{Action: payment.ResolveRefund, RefundID: r.ID, Status: payment.ResolutionProcessing, Actor: rs.req.Actor, At: now}
	if _, err := dtx.DiscrepancyStartRefund(ctx, cur.ID, res, shown, rs.req.Reason); err != nil {
		return nil, err
	}
	details["refund_id"], details["attempt_id"], details["provider_key"], details["amount"] = r.ID, a.ID, a.ProviderKey, amount
	return a, tx.AuditInsert(ctx, payment.AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now,
		Actor: rs.req.Actor, Action: "discrepancy.refund_requested", Reason: rs.req.Reason, Details: details})
}

// AnswerPurged answers a key whose stored answer was purged: the
// discrepancy as it is now.
func (rs *resolving) AnswerPurged(ctx context.Context, _ idempotency.Record) (idempotency.Answer, error) {
	cur, err := rs.s.store.DiscrepancyGetByID(ctx, rs.id)
	if err != nil {
		return idempotency.Answer{}, err
	}
	body, err := json.Marshal(cur)
	return idempotency.Answer{Kind: idempotency.KindOK, Body: body, Replayed: true}, err
}

// Answer renders the resolve's answer: its discrepancy.
func (rs *resolving) Answer(ctx context.Context, tx payment.Tx, p *payment.Payment, a *payment.Attempt) (idempotency.Answer, error) {
	return rs.s.payments.ResolutionAnswer(ctx, tx, rs.id, p, a)
}
