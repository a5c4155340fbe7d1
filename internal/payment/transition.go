package payment

import (
	"context"
	"encoding/json"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// States are data, transitions are code: decide says what one provider
// outcome does to a locked payment and its attempt, without touching the
// database; apply loads what decide needs, calls it, and writes the result.

// Transition is what one outcome does.
type Transition struct {
	// Settled: the attempt was already resolved by another path; nothing
	// is written.
	Settled bool
	// Attempt is the attempt as it is to be stored (status, failure,
	// provider object, next reconcile time).
	Attempt Attempt
	// Refund is the refund as it is to be stored; nil unless the attempt
	// is a refund.
	Refund *Refund
	// Payment is the payment's next state; nil leaves it unchanged and
	// writes the audit entry alone, without an event.
	Payment *Payment
	// From is the status the payment had; Moved tells it changed status
	// (a transition CanTransition allows).
	From  Status
	Moved bool
	// Ignored: the outcome asked for a transition CanTransition refuses;
	// the payment kept its status.
	Ignored bool
	// Events are emitted in order with the payment's next snapshot; empty
	// when Payment is nil.
	Events []string
	// Audit is the audit entry's actor, action, reason and details (apply
	// fills the payment, the time, and from/to when Payment is set).
	Audit AuditEntry
	// CloseWaiting: the payment became final through another operation;
	// its waiting authorization is resolved so nobody polls it.
	CloseWaiting bool
	// Release is the provider intent whose cancel (a release) is to be
	// armed; "" for none.
	Release string
}

// facts are what decide needs beyond the payment, the attempt and the
// outcome, read by apply.
type facts struct {
	Now   time.Time
	Actor string
	// Refund is the attempt's refund, and RefundedSum the sum of the
	// payment's succeeded refunds as stored before this outcome; both only
	// for a refund.
	Refund      *Refund
	RefundedSum int64
	Wait        waitPolicy
}

// Apply records an outcome on a locked payment and its attempt: it loads
// the facts, decides, and writes the refund, the attempt, the payment, the
// audit entry and the event(s). An attempt already resolved by another
// path is left alone. It returns the attempt as stored.
func (s *Service) Apply(ctx context.Context, tx Tx, p *Payment, attemptID string, out Outcome, actor string, now time.Time) (*Attempt, error) {
	a, err := tx.AttemptGetByID(ctx, attemptID)
	if err != nil {
		return nil, err
	}
	return s.applyTo(ctx, tx, p, a, out, actor, now)
}

// applyTo is Apply on an attempt read in the caller's transaction.
func (s *Service) applyTo(ctx context.Context, tx Tx, p *Payment, a *Attempt, out Outcome, actor string, now time.Time) (_ *Attempt, err error) {
	if a.Status.Resolved() {
		return a, nil
	}
	if err := s.settleDiscrepancy(ctx, tx, p, a, attemptStatus(a.Operation, out), now); err != nil {
		return nil, err
	}
	f := facts{Now: now, Actor: actor, Wait: s.waitPolicy()}
	if a.Operation == OpRefund {
		if f.Refund, err = tx.RefundGetByAttempt(ctx, a.ID); err != nil {
			return nil, err
		}
		if f.RefundedSum, err = tx.RefundSumSucceeded(ctx, p.ID); err != nil {
			return nil, err
		}
	}
	t := decide(*p, *a, out, f)
	if err := s.writeTransition(ctx, tx, p, t, now); err != nil {
		return nil, err
	}
	return &t.Attempt, nil
}

// writeTransition writes a decided transition in the caller's transaction, and
// leaves p as stored.
func (s *Service) writeTransition(ctx context.Context, tx Tx, p *Payment, t Transition, now time.Time) error {
	if t.Settled {
		return nil
	}
	if t.Refund != nil {
		if err := tx.RefundUpdateOutcome(ctx, t.Refund); err != nil {
			return err
		}
	}
	if t.Payment != nil && !t.CloseWaiting {
		if err := tx.AttemptUpdateOutcomeWithPayment(ctx, &t.Attempt, t.Payment); err != nil {
			return err
		}
	} else if err := tx.AttemptUpdateOutcome(ctx, &t.Attempt); err != nil {
		return err
	}
	if t.CloseWaiting {
		if err := closeWaiting(ctx, tx, t.Payment, now); err != nil {
			return err
		}
	}
	if t.Payment == nil {
		audit := t.Audit
		audit.AccountID, audit.PaymentID, audit.At = p.AccountID, p.ID, now
		if err := tx.AuditInsert(ctx, audit); err != nil {
			return err
		}
	} else {
		if t.CloseWaiting {
			if err := tx.PaymentUpdateState(ctx, t.Payment); err != nil {
				return err
			}
		}
		*p = *t.Payment
		if t.Moved {
			s.CountTransition(p, t.From)
		}
		if err := s.Write(ctx, tx, Change{Payment: p, From: t.From, Events: t.Events, Audit: t.Audit}); err != nil {
			return err
		}
	}
	if t.Release == "" {
		return nil
	}
	return s.insertRelease(ctx, tx, p, t.Release, t.Audit.Actor, now)
}

// decide is what an outcome does to a payment (as locked) and its attempt
// (as read). It never reads or writes anything.
func decide(p Payment, a Attempt, out Outcome, f facts) Transition {
	if a.Status.Resolved() {
		return Transition{Settled: true, Attempt: a, From: p.Status}
	}
	if a.Operation == OpCancel && readCancel(&a).Release {
		return decideRelease(p, a, out, f)
	}
	next := p
	next.UpdatedAt = f.Now
	wasWaiting := a.Status == AttemptWaiting
	a.Status, a.UpdatedAt = attemptStatus(a.Operation, out), f.Now
	if wasWaiting && !a.Status.Answered() {
		// A poll that could not learn anything leaves the payment waiting.
		a.Status = AttemptWaiting
	}
	if a.Status == AttemptFailed || a.Status == AttemptDeclined {
		a.FailureCode, a.FailureMessage = out.FailureCode, out.FailureMessage
	}
	t := Transition{From: p.Status, Audit: AuditEntry{Actor: f.Actor, Action: "provider." + string(a.Operation),
		Details: outcomeDetails(&a, out)}}
	var event string
	switch a.Operation {
	case OpAuthorize:
		decideAuthorize(&next, &a, p, out)
	case OpCapture:
		event = decideCapture(&next, &a, p, out)
	case OpCancel:
		event = decideCancel(&next, &a, out)
	case OpRefund:
		t.Refund, event = decideRefund(&next, &a, out, f)
		t.Audit.Details["refund_id"] = t.Refund.ID
	}
	return conclude(t, p, next, a, out, event, f)
}

// outcomeDetails are the audit details every provider outcome records.
func outcomeDetails(a *Attempt, out Outcome) map[string]any {
	details := map[string]any{"attempt_id": a.ID, "provider_key": a.ProviderKey, "outcome": string(out.Outcome)}
	if out.FailureCode != "" {
		details["failure_code"] = out.FailureCode
	}
	return details
}

// decideAuthorize moves the payment to the status the authorization's
// outcome proves.
func decideAuthorize(next *Payment, a *Attempt, p Payment, out Outcome) {
	next.Status = AuthorizationStatus(out)
	if out.ExpiredAtProvider() && p.Status.Waiting() {
		// The provider let it lapse but it stays open until canceled:
		// it ends here only once the cancel has made sure (expire).
		next.Status, a.Status = p.Status, AttemptWaiting
	}
	if next.Status == StatusDeclined && p.Status == StatusPending {
		// Once the provider is processing, a refusal fails the payment.
		next.Status = StatusFailed
	}
	if out.Intent != nil {
		a.ProviderObjectID, next.ProviderPaymentID = out.Intent.ID, out.Intent.ID
	}
	switch next.Status {
	case StatusCaptured:
		next.AmountCaptured = CapturedAmount(p.Amount, out.Intent)
	case StatusDeclined, StatusFailed:
		next.FailureCode, next.FailureMessage = out.FailureCode, out.FailureMessage
		if next.FailureCode == "" && out.Intent != nil {
			next.FailureCode, next.FailureMessage = out.Intent.FailureCode, out.Intent.FailureMessage
		}
	}
	if a.Status == AttemptWaiting {
		applyWaiting(next, out.Intent)
	}
}

// decideCapture captures, or adopts what a refusal showed of the intent;
// it returns the event of a refusal.
func decideCapture(next *Payment, a *Attempt, p Payment, out Outcome) string {
	switch a.Status {
	case AttemptSucceeded:
		next.Status, next.AmountCaptured = StatusCaptured, CapturedAmount(p.Amount, out.Intent)
	case AttemptFailed:
		adoptIntent(next, out.Intent)
		return "payment.capture_failed"
	}
	return ""
}

// decideCancel cancels, or adopts what a refusal showed of the intent; it
// returns the event of a refusal.
func decideCancel(next *Payment, a *Attempt, out Outcome) string {
	switch a.Status {
	case AttemptSucceeded:
		next.Status = StatusCanceled
		if abandoned(a) {
			next.FailureCode, next.FailureMessage = FailureActionExpired, "the customer did not pay before the payment expired"
		}
	case AttemptFailed:
		adoptIntent(next, out.Intent)
		return "payment.cancel_failed"
	}
	return ""
}

// decideRefund settles the refund and the payment's refunded total; it
// returns the event of a settled refund.
func decideRefund(next *Payment, a *Attempt, out Outcome, f facts) (*Refund, string) {
	r := *f.Refund
	own := f.RefundedSum
	if r.Status == RefundSucceeded {
		own -= r.Amount
	}
	var event string
	switch a.Status {
	case AttemptSucceeded:
		r.Status, event = RefundSucceeded, "payment.refunded"
		own += r.Amount
	case AttemptFailed:
		r.Status, event = RefundFailed, "payment.refund_failed"
	default:
		r.Status = RefundUnknown
	}
	if out.Refund != nil {
		r.ProviderRefundID = out.Refund.ID
		a.ProviderObjectID = out.Refund.ID
	}
	r.UpdatedAt = f.Now
	next.AmountRefunded = refundedAmount(own, next)
	return &r, event
}

// conclude judges the proposed next state through CanTransition and
// decides what is written and emitted.
func conclude(t Transition, p, next Payment, a Attempt, out Outcome, event string, f facts) Transition {
	moved := next.Status != p.Status && CanTransition(p.Status, next.Status)
	if a.Status == AttemptWaiting {
		st := next
		if !moved {
			st = p
		}
		a.NextReconcileAt = f.Wait.next(&st, &a, f.Now)
		if out.ExpiredAtProvider() {
			now := f.Now
			a.NextReconcileAt = &now // due at once: cancel it at the provider
		}
	}
	t.Attempt, t.Moved = a, moved
	t.CloseWaiting = moved && next.Status.Final() && a.Operation != OpAuthorize
	if next.Status != p.Status && !moved {
		// A stale or contradictory outcome never moves a payment backwards.
		next.Status, t.Ignored = p.Status, true
		t.Audit.Details["ignored"] = "transition not allowed"
	}
	if !moved && event == "" {
		return t
	}
	if !moved {
		next.ProviderPaymentID, next.AmountCaptured = p.ProviderPaymentID, p.AmountCaptured
		next.FailureCode, next.FailureMessage = p.FailureCode, p.FailureMessage
		next.NextAction, next.ClientSecret, next.ActionExpiresAt = p.NextAction, p.ClientSecret, p.ActionExpiresAt
	} else if next.Status != StatusRequiresAction {
		// Nothing is left for the customer to do.
		next.NextAction = nil
	}
	t.Payment = &next
	switch {
	case moved && event != "" && event != "payment.refunded":
		// A refusal that showed the payment had moved on at the
		// provider: the refusal, then the change it revealed.
		t.Events = []string{event, "payment." + string(next.Status)}
	case event != "":
		t.Events = []string{event}
	default:
		t.Events = []string{"payment." + string(next.Status)}
	}
	if needsRelease(&next, a.Operation, out.Intent) {
		t.Release = next.ProviderPaymentID
	}
	return t
}

// decideRelease: a release leaves the payment's status alone, unless its
// refusal shows the customer paid the intent first: then the payment takes
// the provider's state, and the order has its live payment. A release that
// failed while the intent may still be paid is armed again, for the
// reconciler to send.
func decideRelease(p Payment, a Attempt, out Outcome, f facts) Transition {
	a.Status, a.UpdatedAt = attemptStatus(OpCancel, out), f.Now
	if a.Status == AttemptFailed {
		a.FailureCode, a.FailureMessage = out.FailureCode, out.FailureMessage
	}
	t := Transition{Attempt: a, From: p.Status, Audit: AuditEntry{Actor: f.Actor, Action: "provider." + string(OpCancel),
		Reason: reasonRelease, Details: outcomeDetails(&a, out)}}
	if a.Status != AttemptFailed {
		return t
	}
	if to := paidStatus(out.Intent); to != "" && CanAdopt(p.Status, to) {
		next := p
		next.Status, next.FailureCode, next.FailureMessage, next.UpdatedAt = to, "", "", f.Now
		if to == StatusCaptured {
			next.AmountCaptured = CapturedAmount(p.Amount, out.Intent)
		}
		t.Payment, t.Moved, t.Events = &next, true, []string{"payment." + string(to)}
		return t
	}
	if payable(out.Intent) {
		t.Release = readCancel(&a).IntentID
	}
	return t
}

// needsRelease tells whether the intent of a payment whose authorization
// has just ended declined or failed may still be paid, so its cancel (a
// release) is armed.
func needsRelease(p *Payment, op Operation, in *provider.Intent) bool {
	return op == OpAuthorize && (p.Status == StatusDeclined || p.Status == StatusFailed) && p.ProviderPaymentID != "" && payable(in)
}

// attemptStatus classifies an outcome for an attempt of one operation.
func attemptStatus(op Operation, out Outcome) AttemptStatus {
	switch out.Outcome {
	case provider.Declined:
		if op == OpAuthorize {
			return AttemptDeclined
		}
		return AttemptFailed
	case provider.Failed:
		return AttemptFailed
	case provider.Succeeded:
		switch op {
		case OpAuthorize:
			switch AuthorizationStatus(out) {
			case StatusAuthorized, StatusCaptured, StatusCanceled:
				return AttemptSucceeded
			case StatusDeclined:
				return AttemptDeclined
			case StatusRequiresAction, StatusPending:
				return AttemptWaiting
			}
		case OpCapture:
			if out.Intent != nil && out.Intent.State == provider.IntentCaptured {
				return AttemptSucceeded
			}
		case OpCancel:
			if out.Intent != nil && out.Intent.State == provider.IntentCanceled {
				return AttemptSucceeded
			}
		case OpRefund:
			if out.Refund != nil && (out.Refund.State == provider.RefundSucceeded || out.Refund.State == provider.RefundPending) {
				return AttemptSucceeded
			}
			if out.Refund != nil && out.Refund.State == provider.RefundFailed {
				return AttemptFailed
			}
		}
	}
	return AttemptUnknown
}

// AuthorizationStatus maps an authorization outcome to the payment's
// status. When in doubt: unknown.
func AuthorizationStatus(out Outcome) Status {
	switch out.Outcome {
	case provider.Declined:
		return StatusDeclined
	case provider.Failed:
		return StatusFailed
	case provider.Succeeded:
		if out.Intent == nil {
			return StatusUnknown
		}
		switch out.Intent.State {
		case provider.IntentAuthorized:
			return StatusAuthorized
		case provider.IntentCaptured:
			return StatusCaptured
		case provider.IntentCanceled:
			return StatusCanceled
		case provider.IntentNeedsPaymentMethod:
			return StatusDeclined
		case provider.IntentRequiresAction:
			return StatusRequiresAction
		case provider.IntentProcessing:
			return StatusPending
		}
	}
	return StatusUnknown
}

// adoptIntent moves a payment to the state its intent proves when a
// capture or cancel was refused because the payment had moved on at the
// provider (canceled in the dashboard, or captured by someone else).
func adoptIntent(p *Payment, in *provider.Intent) {
	if in == nil {
		return
	}
	switch in.State {
	case provider.IntentCanceled:
		p.Status = StatusCanceled
	case provider.IntentCaptured:
		p.Status, p.AmountCaptured = StatusCaptured, CapturedAmount(p.Amount, in)
	}
}

// RefundedTotal is what the payment shows as refunded: the larger of the
// sum of its own refunds the provider made and the total the provider last
// reported (which also counts refunds made elsewhere, as in its dashboard),
// never more than was captured. Call it under the payment's lock whenever a
// refund resolves or a refund event arrives.
func RefundedTotal(ctx context.Context, tx Tx, p *Payment) (int64, error) {
	own, err := tx.RefundSumSucceeded(ctx, p.ID)
	if err != nil {
		return 0, err
	}
	return refundedAmount(own, p), nil
}

// refundedAmount is refundedTotal given the sum of the payment's own
// succeeded refunds.
func refundedAmount(own int64, p *Payment) int64 {
	return min(max(own, p.ProviderAmountRefunded), p.AmountCaptured)
}

func CapturedAmount(amount int64, in *provider.Intent) int64 {
	if in != nil && in.AmountReceived > 0 {
		return in.AmountReceived
	}
	return amount
}

// Change is one state change of a payment as recorded: its audit entry
// and its event(s).
type Change struct {
	// Payment is the payment as changed; its UpdatedAt dates the entry and
	// the events.
	Payment *Payment
	// From is the status before; "" leaves it out of the audit details
	// (the status did not move).
	From Status
	// Events are emitted in order after the audit entry; none, or "",
	// emits "payment.<status>".
	Events []string
	// Audit carries the entry's actor, action, reason and details; the
	// payment, the time, and from/to are filled in. Details is written
	// to: a caller that reuses it sees from/to.
	Audit AuditEntry
}

// Write records a state change, in the caller's transaction: the audit
// entry, then the event(s) (with the merchant webhooks).
func (s *Service) Write(ctx context.Context, tx Tx, c Change) error {
	p, audit := c.Payment, c.Audit
	if audit.Details == nil {
		audit.Details = map[string]any{}
	}
	if c.From != "" {
		audit.Details["from"] = string(c.From)
	}
	audit.Details["to"] = string(p.Status)
	audit.AccountID, audit.PaymentID, audit.At = p.AccountID, p.ID, p.UpdatedAt
	events := c.Events
	if len(events) == 0 {
		events = []string{""}
	}
	for i, ev := range events {
		if ev == "" {
			ev = "payment." + string(p.Status)
		}
		e, err := s.newEvent(p, ev)
		if err != nil {
			return err
		}
		if i == 0 {
			// The entry goes with the first event, in one statement.
			err = tx.AuditEventInsert(ctx, audit, e)
		} else {
			err = tx.EventInsert(ctx, e)
		}
		if err != nil {
			return err
		}
		// Merchant webhooks: enqueued with the event, so a rollback sends
		// nothing and a commit loses nothing.
		if err := tx.WebhooksEnqueue(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// newEvent is one event with the payment's snapshot.
func (s *Service) newEvent(p *Payment, eventType string) (Event, error) {
	ev := Event{ID: s.newID("evt"), AccountID: p.AccountID, PaymentID: p.ID, Type: eventType, CreatedAt: p.UpdatedAt}
	payload, err := json.Marshal(struct {
		ID        string   `json:"id"`
		Type      string   `json:"type"`
		CreatedAt string   `json:"created_at"`
		Payment   *Payment `json:"payment"`
	}{ev.ID, ev.Type, FormatTime(ev.CreatedAt), p})
	if err != nil {
		return Event{}, err
	}
	ev.Payload = payload
	return ev, nil
}
