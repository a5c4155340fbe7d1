package payment

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// outcome is a classified provider answer for any operation.
type outcome struct {
	provider.Result
	Refund *provider.Refund
}

// call learns the outcome of an attempt without ever starting a new one.
// With the provider object's id known and nothing to send, it asks the
// provider; within the provider's key retention it re-sends the attempt's
// exact request with its key, so the provider replays instead of acting
// twice; past the retention, where a re-sent key may act again, it only
// queries the provider's state.
func (s *Service) call(ctx context.Context, acct Account, p *Payment, a *Attempt) outcome {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.providerTimeout)
	defer cancel()
	start := time.Now()
	withinRetention := s.clock().Sub(a.CreatedAt) < s.keyRetention
	var (
		out  outcome
		verb = "send"
	)
	switch {
	case a.Operation == OpAuthorize && a.ProviderObjectID != "":
		verb = "retrieve"
		out = intentOutcome(s.provider.RetrieveIntent(cctx, acct.Credentials, a.ProviderObjectID))
	case withinRetention:
		out = s.resend(cctx, acct, a)
	case a.Operation == OpAuthorize:
		verb = "search"
		in, err := s.provider.SearchIntentByPaymentID(cctx, acct.Credentials, p.ID)
		if err == nil && in.Metadata["attempt"] != strconv.Itoa(a.Number) {
			// An earlier attempt of the same payment (before an ops replay)
			// carries the same payment_id: its intent says nothing about
			// this attempt.
			in, err = nil, provider.ErrNotFound
		}
		out = intentOutcome(in, err)
		if errors.Is(err, provider.ErrNotFound) && s.clock().Sub(a.CreatedAt) >= s.searchGrace {
			out = outcome{Result: provider.Result{Outcome: provider.Failed, FailureCode: "not_found_at_provider",
				FailureMessage: "the provider has no record of this attempt"}}
		}
	case a.Operation == OpCapture || a.Operation == OpCancel:
		// The intent's state tells whether the capture or cancel happened.
		verb = "retrieve"
		in, err := s.provider.RetrieveIntent(cctx, acct.Credentials, p.ProviderPaymentID)
		out = intentOutcome(in, err)
		if err == nil {
			out = inferFromIntent(a.Operation, in)
		}
	default:
		// A refund past the key retention: no safe way to ask; ops decide.
		verb = "none"
		out = outcome{Result: provider.Result{Outcome: provider.Unknown, Err: errors.New("refund past the provider key retention")}}
	}
	s.metrics.ProviderCall(a.Operation, out.Outcome, time.Since(start))
	s.log.LogAttrs(ctx, slog.LevelInfo, "provider call",
		slog.String("payment_id", p.ID), slog.String("attempt_id", a.ID), slog.String("operation", string(a.Operation)),
		slog.String("call", verb), slog.String("outcome", string(out.Outcome)), slog.Any("error", out.Err))
	return out
}

// resend sends the attempt's stored request unchanged.
func (s *Service) resend(ctx context.Context, acct Account, a *Attempt) outcome {
	fail := func(err error) outcome { return outcome{Result: provider.Result{Outcome: provider.Unknown, Err: err}} }
	switch a.Operation {
	case OpAuthorize:
		var r provider.AuthorizeRequest
		if err := json.Unmarshal(a.Request, &r); err != nil {
			return fail(err)
		}
		return outcome{Result: s.provider.Authorize(ctx, acct.Credentials, r)}
	case OpCapture:
		var r provider.CaptureRequest
		if err := json.Unmarshal(a.Request, &r); err != nil {
			return fail(err)
		}
		return outcome{Result: s.provider.Capture(ctx, acct.Credentials, r)}
	case OpCancel:
		var r provider.CancelRequest
		if err := json.Unmarshal(a.Request, &r); err != nil {
			return fail(err)
		}
		return outcome{Result: s.provider.Cancel(ctx, acct.Credentials, r)}
	default:
		var r provider.RefundRequest
		if err := json.Unmarshal(a.Request, &r); err != nil {
			return fail(err)
		}
		rr := s.provider.Refund(ctx, acct.Credentials, r)
		return outcome{Result: provider.Result{Outcome: rr.Outcome, FailureCode: rr.FailureCode,
			FailureMessage: rr.FailureMessage, Err: rr.Err}, Refund: rr.Refund}
	}
}

// intentOutcome turns a lookup into an outcome; a failed lookup is unknown.
func intentOutcome(in *provider.Intent, err error) outcome {
	if err != nil {
		return outcome{Result: provider.Result{Outcome: provider.Unknown, Err: err}}
	}
	return outcome{Result: provider.Result{Outcome: provider.Succeeded, Intent: in}}
}

// inferFromIntent decides a capture or cancel from the intent's state, once
// the provider may have forgotten the attempt's key.
func inferFromIntent(op Operation, in *provider.Intent) outcome {
	done := (op == OpCapture && in.Status == "succeeded") || (op == OpCancel && in.Status == "canceled")
	switch {
	case done:
		return outcome{Result: provider.Result{Outcome: provider.Succeeded, Intent: in}}
	case in.Status == "requires_capture":
		return outcome{Result: provider.Result{Outcome: provider.Failed, Intent: in, FailureCode: "no_effect_at_provider",
			FailureMessage: "the provider shows the payment still authorized"}}
	}
	return outcome{Result: provider.Result{Outcome: provider.Unknown, Intent: in}}
}

// record applies an outcome to a locked payment and its attempt, through
// CanTransition, with the event and the audit entry. An attempt already
// resolved by another path is left alone. It returns the attempt as stored.
func (s *Service) record(ctx context.Context, tx Tx, p *Payment, attemptID string, out outcome, actor string, now time.Time) (*Attempt, error) {
	a, err := tx.AttemptGet(ctx, attemptID)
	if err != nil {
		return nil, err
	}
	if a.Status.Resolved() {
		return a, nil
	}
	next := *p
	next.UpdatedAt = now
	var eventType string
	a.Status, a.UpdatedAt = attemptStatus(a.Operation, out), now
	details := map[string]any{"attempt_id": a.ID, "provider_key": a.ProviderKey, "outcome": string(out.Outcome)}
	if out.FailureCode != "" {
		details["failure_code"] = out.FailureCode
	}

	switch a.Operation {
	case OpAuthorize:
		next.Status = authorizationStatus(out)
		if out.Intent != nil {
			a.ProviderObjectID, next.ProviderPaymentID = out.Intent.ID, out.Intent.ID
		}
		switch next.Status {
		case StatusCaptured:
			next.AmountCaptured = capturedAmount(p.Amount, out.Intent)
		case StatusDeclined, StatusFailed:
			next.FailureCode, next.FailureMessage = out.FailureCode, out.FailureMessage
		}
	case OpCapture:
		if a.Status == AttemptSucceeded {
			next.Status, next.AmountCaptured = StatusCaptured, capturedAmount(p.Amount, out.Intent)
		}
	case OpCancel:
		if a.Status == AttemptSucceeded {
			next.Status = StatusCanceled
		}
	case OpRefund:
		r, err := tx.RefundByAttempt(ctx, a.ID)
		if err != nil {
			return nil, err
		}
		switch a.Status {
		case AttemptSucceeded:
			r.Status = RefundSucceeded
			next.AmountRefunded += r.Amount
			eventType = "payment.refunded"
		case AttemptFailed:
			r.Status = RefundFailed
		default:
			r.Status = RefundUnknown
		}
		if out.Refund != nil {
			r.ProviderRefundID = out.Refund.ID
			a.ProviderObjectID = out.Refund.ID
		}
		r.UpdatedAt = now
		if err := tx.RefundUpdate(ctx, r); err != nil {
			return nil, err
		}
		details["refund_id"] = r.ID
	}
	if err := tx.AttemptUpdateOutcome(ctx, a); err != nil {
		return nil, err
	}

	action := "provider." + string(a.Operation)
	moved := next.Status != p.Status && CanTransition(p.Status, next.Status)
	if next.Status != p.Status && !moved {
		// A stale or contradictory outcome never moves a payment backwards.
		next.Status = p.Status
		details["ignored"] = "transition not allowed"
	}
	if !moved && eventType == "" {
		return a, tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now, Actor: actor, Action: action, Details: details})
	}
	if !moved {
		next.ProviderPaymentID, next.AmountCaptured = p.ProviderPaymentID, p.AmountCaptured
		next.FailureCode, next.FailureMessage = p.FailureCode, p.FailureMessage
	}
	if err := tx.PaymentUpdate(ctx, &next); err != nil {
		return nil, err
	}
	from := p.Status
	*p = next
	if moved {
		s.metrics.PaymentTransition(from, p.Status)
	}
	return a, s.changed(ctx, tx, p, eventType, from, actor, action, "", details)
}

// attemptStatus classifies an outcome for an attempt of one operation.
func attemptStatus(op Operation, out outcome) AttemptStatus {
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
			switch authorizationStatus(out) {
			case StatusAuthorized, StatusCaptured, StatusCanceled:
				return AttemptSucceeded
			case StatusDeclined:
				return AttemptDeclined
			}
		case OpCapture:
			if out.Intent != nil && out.Intent.Status == "succeeded" {
				return AttemptSucceeded
			}
		case OpCancel:
			if out.Intent != nil && out.Intent.Status == "canceled" {
				return AttemptSucceeded
			}
		case OpRefund:
			if out.Refund != nil && (out.Refund.Status == "succeeded" || out.Refund.Status == "pending") {
				return AttemptSucceeded
			}
			if out.Refund != nil && (out.Refund.Status == "failed" || out.Refund.Status == "canceled") {
				return AttemptFailed
			}
		}
	}
	return AttemptUnknown
}

// authorizationStatus maps an authorization outcome to the payment's
// status. When in doubt: unknown.
func authorizationStatus(out outcome) Status {
	switch out.Outcome {
	case provider.Declined:
		return StatusDeclined
	case provider.Failed:
		return StatusFailed
	case provider.Succeeded:
		if out.Intent == nil {
			return StatusUnknown
		}
		switch out.Intent.Status {
		case "requires_capture":
			return StatusAuthorized
		case "succeeded":
			return StatusCaptured
		case "canceled":
			return StatusCanceled
		case "requires_payment_method":
			return StatusDeclined
		}
	}
	return StatusUnknown
}

func capturedAmount(amount int64, in *provider.Intent) int64 {
	if in != nil && in.AmountReceived > 0 {
		return in.AmountReceived
	}
	return amount
}
