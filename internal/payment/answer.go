package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
)

// The answers a client key stores and replays. The domain names what an
// answer says (idempotency.Kind); the api alone maps it to an HTTP status.

// answerer renders a key's answer (see Mutation.Answer).
type answerer interface {
	Answer(ctx context.Context, tx Tx, p *Payment, a *Attempt) (idempotency.Answer, error)
}

// answerPayment is the answer of a payment mutation: the payment when
// nothing was sent, else the attempt's operation. Create, capture, cancel,
// refund and replay answer with it.
type answerPayment struct{ s *Service }

func (ap answerPayment) Answer(ctx context.Context, tx Tx, p *Payment, a *Attempt) (idempotency.Answer, error) {
	return ap.s.PaymentAnswer(ctx, tx, p, a)
}

// PaymentAnswer is the default answer: the payment when nothing was sent, else
// the attempt's operation.
func (s *Service) PaymentAnswer(ctx context.Context, tx Tx, p *Payment, a *Attempt) (idempotency.Answer, error) {
	if a != nil {
		return s.respond(ctx, tx, p, a)
	}
	return answerJSON(idempotency.KindOK, p)
}

// respond renders the answer of an attempt's operation in the payment's
// current state: created or ok when the outcome is known, accepted while it
// is not, and refused with provider_rejected, with the provider's code,
// when the provider refused a capture, cancel or refund.
func (s *Service) respond(ctx context.Context, tx Tx, p *Payment, a *Attempt) (idempotency.Answer, error) {
	if a.Operation == OpCancel && a.Status == AttemptFailed && movedOn(p, a) {
		// The refusal showed the customer had just paid: the payment took
		// the provider's state, and a paid payment cannot be canceled.
		return refusal(&Error{Code: CodeInvalidState, PaymentID: p.ID,
			Message: "the payment is " + string(p.Status) + " at the provider; it can no longer be canceled"})
	}
	if a.Operation != OpAuthorize && a.Status == AttemptFailed {
		return refusal(&Error{Code: CodeProviderRejected, PaymentID: p.ID, ProviderCode: a.FailureCode,
			Message: "the provider refused to " + verbOf(a.Operation) + " the payment; nothing was changed"})
	}
	switch a.Operation {
	case OpAuthorize:
		// A payment that waits for the customer has its answer: created,
		// with what the customer must do.
		if p.Status == StatusProcessing || p.Status == StatusUnknown {
			return answerJSON(idempotency.KindAccepted, p)
		}
		return answerJSON(idempotency.KindCreated, p)
	case OpRefund:
		r, err := tx.RefundGetByAttempt(ctx, a.ID)
		if err != nil {
			return idempotency.Answer{}, err
		}
		return answerJSON(knownOr(a, idempotency.KindCreated), r)
	}
	return answerJSON(knownOr(a, idempotency.KindOK), p)
}

// knownOr is kind once the attempt's outcome is known, accepted before.
func knownOr(a *Attempt, kind idempotency.Kind) idempotency.Kind {
	if a != nil && !a.Status.Resolved() {
		return idempotency.KindAccepted
	}
	return kind
}

func answerJSON(kind idempotency.Kind, v any) (idempotency.Answer, error) {
	body, err := json.Marshal(v)
	return idempotency.Answer{Kind: kind, Body: body}, err
}

// refusal stores an error as a key's answer, so a retry gets it again.
func refusal(e *Error) (idempotency.Answer, error) {
	body, err := e.encodeStored()
	return idempotency.Answer{Kind: idempotency.KindRefused, Body: body}, err
}

// answerKnown answers a key that has its answer already, or is held.
func (s *Service) answerKnown(ctx context.Context, rec idempotency.Record, d idempotency.Decision, m Mutation) (idempotency.Answer, error) {
	if pa, ok := m.(PurgedAnswerer); ok && d == idempotency.ReplayCurrent {
		s.metrics.Idempotency(rec.Scope.Operation, "replayed")
		return pa.AnswerPurged(ctx, rec)
	}
	return s.answer(ctx, rec, d)
}

// answer turns a decision on a known key into the answer or error.
func (s *Service) answer(ctx context.Context, rec idempotency.Record, d idempotency.Decision) (idempotency.Answer, error) {
	op := rec.Scope.Operation
	switch d {
	case idempotency.Replay:
		s.metrics.Idempotency(op, "replayed")
		return idempotency.Answer{Kind: rec.ResponseKind, Body: rec.ResponseBody, Replayed: true}, nil
	case idempotency.ReplayCurrent:
		s.metrics.Idempotency(op, "replayed")
		p, err := s.store.PaymentGetByID(ctx, rec.Scope.AccountID, rec.PaymentID)
		if err != nil {
			return idempotency.Answer{}, err
		}
		ans, err := answerJSON(idempotency.KindOK, p)
		ans.Replayed = true
		return ans, err
	case idempotency.Reused:
		s.metrics.Idempotency(op, "reused")
		return idempotency.Answer{}, Errorf(CodeIdempotencyKeyReused, "this Idempotency-Key was used with a different request")
	case idempotency.InUse:
		s.metrics.Idempotency(op, "in_use")
		return idempotency.Answer{}, errInUse
	}
	return idempotency.Answer{}, fmt.Errorf("payment: no answer for decision %d", d)
}

var errInUse = Errorf(CodeIdempotencyKeyInUse, "a request with this Idempotency-Key is in progress; retry later")

func verbOf(op Operation) string {
	switch op {
	case OpCapture:
		return "capture"
	case OpCancel:
		return "cancel"
	}
	return "refund"
}

// AnswerError is the error a refused answer stores; nil for any other.
func AnswerError(ans idempotency.Answer) error {
	if ans.Kind != idempotency.KindRefused {
		return nil
	}
	e, err := DecodeStoredError(ans.Body)
	if err != nil {
		return err
	}
	return e
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
	return tx.IdempotencyKeyComplete(ctx, rec.ID, ans, now)
}
