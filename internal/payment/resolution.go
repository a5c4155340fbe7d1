package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
)

// ResolveRequest is an operator's resolve request.
type ResolveRequest struct {
	Actor  string
	Reason string
	Action ResolveAction
}

// providerShown is what the provider showed of a payment when a refund was
// sent to resolve a discrepancy; the refund's success records it on the
// payment.
type providerShown struct {
	IntentID       string `json:"provider_payment_id"`
	AmountCaptured int64  `json:"amount_captured"`
	AmountRefunded int64  `json:"amount_refunded"`
}

var errHeld = Errorf(CodeInvalidState, "the discrepancy is resolved, or another resolution of it is in progress")

// Resolve closes a discrepancy with an action, on the idempotent path of
// every mutation (CONTRACT §14): note records it; adopt_provider_state
// makes the payment say what the provider says now; refund returns what
// the provider still holds through the payment's refund path. The
// discrepancy is held for the whole resolution: claimed before any
// provider call, then held by the refund in flight until it settles, so of
// two racing resolves exactly one acts. A refund that succeeded resolves
// it (ok); a refused one leaves it open (refused, provider_rejected); one
// in doubt leaves it open and held (accepted) until the refund is settled.
func (d *Discrepancies) Resolve(ctx context.Context, key, id string, r ResolveRequest) (idempotency.Answer, error) {
	switch r.Action {
	case ResolveAdopt, ResolveRefund, ResolveNote:
	default:
		return idempotency.Answer{}, fieldError("action", "must be adopt_provider_state, refund or note")
	}
	dsc, err := d.store.DiscrepancyGet(ctx, id)
	if err != nil {
		return idempotency.Answer{}, err
	}
	acct, err := d.accounts.Payer(ctx, dsc.AccountID)
	if err != nil {
		return idempotency.Answer{}, err
	}
	k, err := NewKey(acct.ID, idempotency.OpAdminResolve, key, dsc.PaymentID, struct {
		DiscrepancyID string        `json:"discrepancy_id"`
		Action        ResolveAction `json:"action"`
		Actor         string        `json:"actor"`
		Reason        string        `json:"reason"`
	}{id, r.Action, r.Actor, r.Reason})
	if err != nil {
		return idempotency.Answer{}, err
	}
	rs := &resolving{answerResolution: answerResolution{s: d.s, id: id}, d: d, acct: acct,
		paymentID: dsc.PaymentID, req: r, keyHash: k.Scope.KeyHash}
	ans, err := d.s.Execute(WithReason(WithActor(ctx, r.Actor), r.Reason), acct, k, rs)
	if err != nil && rs.claimed {
		// Nothing was started: another resolve may act at once, not only
		// once the claim has lapsed. A started refund already ended it.
		if rerr := d.store.DiscrepancyReleaseClaim(context.WithoutCancel(ctx), id, rs.keyHash); rerr != nil {
			d.log.WarnContext(ctx, "resolve: claim not released; it lapses with its lease", slog.String("discrepancy_id", id),
				slog.String("error", rerr.Error()))
		}
	}
	return ans, err
}

// resolving is one resolve request on the money path.
type resolving struct {
	answerResolution
	d         *Discrepancies
	acct      Account
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
	s := rs.d.s
	now := s.clock()
	if _, err := rs.d.store.DiscrepancyClaim(ctx, rs.id, rs.keyHash, now.Add(s.lease), now); errors.Is(err, ErrNotFound) {
		return errHeld
	} else if err != nil {
		return err
	}
	rs.claimed = true
	if rs.req.Action == ResolveNote {
		return nil
	}
	p, err := s.store.PaymentGet(ctx, rs.acct.ID, rs.paymentID)
	if err != nil {
		return err
	}
	st, err := rs.d.fetch(ctx, rs.acct, p)
	if err != nil || len(st.failed) > 0 {
		return Errorf(CodeUnavailable, "the provider could not be asked about the payment")
	}
	if st.intent == nil {
		return Errorf(CodeInvalidState, "the provider has no payment for this discrepancy")
	}
	rs.st, rs.asked = st, true
	return nil
}

// Start runs in the transaction that reserves the key: under the
// payment's and the discrepancy's locks it checks that this resolve still
// holds it, then acts. A refund is only started here; note and adopt
// complete at once.
func (rs *resolving) Start(ctx context.Context, tx Tx, at Reserved) (Started, error) {
	dtx, ok := tx.(DiscrepancyTx)
	if !ok {
		return Started{}, errors.New("payment: the store cannot resolve discrepancies")
	}
	// Lock order everywhere: key, payment, discrepancy (as settling a
	// refund takes them).
	p, err := tx.PaymentLock(ctx, rs.acct.ID, at.PaymentID)
	if err != nil {
		return Started{}, err
	}
	cur, err := dtx.DiscrepancyLock(ctx, rs.id)
	if err != nil {
		return Started{}, err
	}
	claimedByOther := cur.ClaimedUntil != nil && at.Now.Before(*cur.ClaimedUntil) && !bytes.Equal(cur.ClaimKeyHash, rs.keyHash)
	if cur.Status != DiscrepancyOpen || cur.Held() || claimedByOther {
		return Started{}, errHeld
	}
	if rs.req.Action != ResolveNote && !rs.asked {
		return Started{}, Errorf(CodeUnavailable, "the resolution was not prepared; retry")
	}
	details := map[string]any{"discrepancy_id": cur.ID, "kind": string(cur.Kind), "resolution": string(rs.req.Action)}
	switch rs.req.Action {
	case ResolveRefund:
		a, err := rs.startRefund(ctx, tx, dtx, p, cur, at.AttemptID, details, at.Now)
		return Send(p, a), err
	case ResolveAdopt:
		err := rs.d.adopt(ctx, tx, p, cur.Kind, rs.st, rs.req, details, at.Now)
		if errors.Is(err, ErrLiveOrderConflict) {
			return Started{}, Errorf(CodeInvalidState, "the order has another live payment; the provider's state cannot be adopted")
		}
		if err != nil {
			return Started{}, err
		}
	}
	if err := tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: at.Now,
		Actor: rs.req.Actor, Action: "discrepancy.resolved", Reason: rs.req.Reason, Details: details}); err != nil {
		return Started{}, err
	}
	_, err = dtx.DiscrepancyResolve(ctx, rs.id, rs.req.Actor, rs.req.Action, at.Now)
	return Done(p), err
}

// startRefund writes the refund of what the provider still holds, on the
// payment's refund path, and ties it to the discrepancy: the payment itself
// is left as it is until the refund succeeds.
func (rs *resolving) startRefund(ctx context.Context, tx Tx, dtx DiscrepancyTx, p *Payment, cur *Discrepancy, attemptID string,
	details map[string]any, now time.Time) (*Attempt, error) {
	in := rs.st.intent
	amount := in.AmountReceived - rs.st.refunded
	if intentStatus(in) != StatusCaptured || amount <= 0 {
		return nil, Errorf(CodeInvalidState, "the provider holds nothing to refund for this payment")
	}
	r, a, err := rs.d.s.StartRefund(ctx, tx, p, attemptID, amount, in.ID, now)
	if err != nil {
		return nil, err
	}
	shown, err := json.Marshal(providerShown{IntentID: in.ID, AmountCaptured: in.AmountReceived, AmountRefunded: rs.st.refunded})
	if err != nil {
		return nil, err
	}
	res := DiscrepancyResolution{Action: ResolveRefund, RefundID: r.ID, Status: ResolutionProcessing, Actor: rs.req.Actor, At: now}
	if _, err := dtx.DiscrepancyStartRefund(ctx, cur.ID, res, shown, rs.req.Reason); err != nil {
		return nil, err
	}
	details["refund_id"], details["attempt_id"], details["provider_key"], details["amount"] = r.ID, a.ID, a.ProviderKey, amount
	return a, tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now,
		Actor: rs.req.Actor, Action: "discrepancy.refund_requested", Reason: rs.req.Reason, Details: details})
}

// answerResolution answers a resolve with its discrepancy (found by the
// attempt's refund when id is ""): ok once resolved, accepted while its
// refund is in doubt, refused with provider_rejected when the provider
// refused it.
type answerResolution struct {
	s  *Service
	id string
}

func (ar answerResolution) Answer(ctx context.Context, tx Tx, p *Payment, a *Attempt) (idempotency.Answer, error) {
	if a != nil && a.Status == AttemptFailed {
		return ar.s.respond(ctx, tx, p, a)
	}
	dtx, ok := tx.(DiscrepancyTx)
	if !ok {
		return idempotency.Answer{}, errors.New("payment: the store cannot resolve discrepancies")
	}
	var (
		cur *Discrepancy
		err error
	)
	if ar.id != "" {
		cur, err = dtx.DiscrepancyLock(ctx, ar.id)
	} else if a != nil {
		var r *Refund
		if r, err = tx.RefundByAttempt(ctx, a.ID); err == nil {
			cur, err = dtx.DiscrepancyByRefund(ctx, r.ID)
		}
	} else {
		err = errors.New("payment: a resolve's answer needs its discrepancy")
	}
	if err != nil {
		return idempotency.Answer{}, err
	}
	return answerJSON(knownOr(a, idempotency.KindOK), cur)
}

// ResolutionAnswer is the answer of a resolve of discrepancy id (see
// answerResolution), for the resolve's Mutation outside the core.
func (s *Service) ResolutionAnswer(ctx context.Context, tx Tx, id string, p *Payment, a *Attempt) (idempotency.Answer, error) {
	return answerResolution{s: s, id: id}.Answer(ctx, tx, p, a)
}

// AnswerPurged answers a key whose stored answer was purged: the
// discrepancy as it is now.
func (rs *resolving) AnswerPurged(ctx context.Context, _ idempotency.Record) (idempotency.Answer, error) {
	cur, err := rs.d.store.DiscrepancyGet(ctx, rs.id)
	if err != nil {
		return idempotency.Answer{}, err
	}
	ans, err := answerJSON(idempotency.KindOK, cur)
	ans.Replayed = true
	return ans, err
}

// settleDiscrepancy carries a refund's outcome to the discrepancy it was
// sent to resolve, in the transaction that records it, whoever records it
// (the request, a retry, the reconciler): success first records on the
// payment what the provider showed, then resolves the discrepancy; a
// refusal leaves it open and free; doubt keeps it held.
func (s *Service) settleDiscrepancy(ctx context.Context, tx Tx, p *Payment, a *Attempt, status AttemptStatus, now time.Time) error {
	dtx, ok := tx.(DiscrepancyTx)
	if !ok || a.Operation != OpRefund {
		return nil
	}
	r, err := tx.RefundByAttempt(ctx, a.ID)
	if err != nil {
		return err
	}
	dsc, err := dtx.DiscrepancyByRefund(ctx, r.ID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil || dsc.Status != DiscrepancyOpen || dsc.Resolution == nil {
		return err
	}
	switch status {
	case AttemptSucceeded:
	case AttemptFailed:
		_, err := dtx.DiscrepancySetResolutionStatus(ctx, dsc.ID, ResolutionFailed)
		return err
	default:
		_, err := dtx.DiscrepancySetResolutionStatus(ctx, dsc.ID, ResolutionUnknown)
		return err
	}
	res := dsc.Resolution
	details := map[string]any{"discrepancy_id": dsc.ID, "kind": string(dsc.Kind), "resolution": string(ResolveRefund), "refund_id": r.ID}
	if err := s.adoptShown(ctx, tx, p, dsc, r, details, now); err != nil {
		return err
	}
	if err := tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now,
		Actor: res.Actor, Action: "discrepancy.resolved", Reason: res.Reason, Details: details}); err != nil {
		return err
	}
	_, err = dtx.DiscrepancyResolve(ctx, dsc.ID, res.Actor, ResolveRefund, now)
	return err
}

// adoptShown records on the payment what the provider showed when the
// refund was sent: captured, with the provider's captured amount, and its
// refunds made elsewhere. Recording the refund itself follows.
func (s *Service) adoptShown(ctx context.Context, tx Tx, p *Payment, dsc *Discrepancy, r *Refund, details map[string]any, now time.Time) error {
	var shown providerShown
	if err := json.Unmarshal(dsc.Adopt, &shown); err != nil {
		return err
	}
	p.ProviderAmountRefunded = max(p.ProviderAmountRefunded, shown.AmountRefunded+r.Amount)
	from := p.Status
	if (from == StatusCaptured && p.AmountCaptured == shown.AmountCaptured) || (from != StatusCaptured && !CanAdopt(from, StatusCaptured)) {
		return nil
	}
	p.Status, p.AmountCaptured, p.UpdatedAt = StatusCaptured, shown.AmountCaptured, now
	p.FailureCode, p.FailureMessage = "", ""
	if p.ProviderPaymentID == "" {
		p.ProviderPaymentID = shown.IntentID
	}
	if err := tx.PaymentUpdate(ctx, p); err != nil {
		return err
	}
	res := dsc.Resolution
	if from != StatusCaptured {
		s.metrics.PaymentTransition(from, p.Status)
		return s.Write(ctx, tx, Change{Payment: p, From: from, Audit: AuditEntry{Actor: res.Actor,
			Action: "discrepancy.adopt_provider_state", Reason: res.Reason, Details: maps.Clone(details)}})
	}
	return s.Write(ctx, tx, Change{Payment: p, Events: []string{"payment.captured"}, Audit: AuditEntry{Actor: res.Actor,
		Action: "discrepancy.adopt_provider_state", Reason: res.Reason, Details: maps.Clone(details)}})
}
