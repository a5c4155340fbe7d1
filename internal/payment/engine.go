package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
)

// work is a provider call owned by this request: the key's lease is held.
type work struct {
	recovered bool
	scope     idempotency.Scope
	payment   *Payment
	attempt   *Attempt
	render    renderer
}

// starter runs in transaction 1 for a new key: it checks the payment's
// state under its lock and writes the attempt the key will refer to. A nil
// attempt means nothing is to be sent: the key completes at once with the
// flow's answer (200 and the payment by default).
type starter func(ctx context.Context, tx Tx, now time.Time, paymentID, attemptID string) (*Payment, *Attempt, error)

// renderer answers a mutation in the payment's current state, in the
// transaction that completes its key; a nil attempt: nothing was sent.
type renderer func(ctx context.Context, tx Tx, p *Payment, a *Attempt) (idempotency.Response, error)

// flow is one mutation on the idempotent path every mutation takes.
type flow struct {
	scope     idempotency.Scope
	fp        []byte
	paymentID string
	// ahead names the reads start makes first, which travel with the
	// reservation.
	ahead ReadAhead
	start starter
	// prepare runs for a key not seen before, outside any transaction and
	// before the key is reserved: what start needs to know first. Nil: none.
	prepare func(ctx context.Context) error
	// render answers; nil: the payment, or the attempt's operation.
	render renderer
	// current answers a key whose response was purged; nil: the payment.
	current func(ctx context.Context, rec idempotency.Record) (idempotency.Response, error)
}

// execute runs a mutation of a payment on the idempotent path.
func (s *Service) execute(ctx context.Context, acct Account, scope idempotency.Scope, fp []byte, paymentID string, ahead ReadAhead, start starter) (idempotency.Response, error) {
	return s.executeFlow(ctx, acct, flow{scope: scope, fp: fp, paymentID: paymentID, ahead: ahead, start: start})
}

// executeFlow is the idempotent shape of every mutation:
//
//  1. a known key is answered by one indexed read when it needs no recovery;
//  2. transaction 1 reserves the key under its unique constraint and starts
//     the attempt (or, for a key whose holder died or whose outcome is
//     unknown, takes over the same attempt). A crash after it leaves an
//     attempt in processing under a lease; a retry after the lease, or the
//     reconciler, recovers it with the same provider key;
//  3. the provider call runs outside any transaction with the derived key;
//  4. transaction 2 records the outcome and the response under the key. A
//     crash after it and before the response is written leaves a completed
//     key that replays.
func (s *Service) executeFlow(ctx context.Context, acct Account, f flow) (idempotency.Response, error) {
	if f.render == nil {
		f.render = s.render
	}
	if rec, err := s.store.KeyGet(ctx, f.scope); err == nil {
		if d := idempotency.Decide(rec, f.fp, s.clock()); d != idempotency.Recover {
			return s.answerFlow(ctx, rec, d, f.current)
		}
	} else if !errors.Is(err, ErrNotFound) {
		return idempotency.Response{}, err
	} else if f.prepare != nil {
		if err := f.prepare(ctx); err != nil {
			return idempotency.Response{}, err
		}
	}
	var (
		b   began
		err error
	)
	for try := 0; ; try++ {
		err = s.store.WithTx(ctx, func(tx Tx) (err error) {
			b, err = s.begin(ctx, tx, f)
			return err
		})
		if errors.Is(err, ErrAttemptNumberTaken) && try < 3 {
			continue
		}
		break
	}
	w := b.work
	switch {
	case err != nil:
		return idempotency.Response{}, err
	case b.known != nil:
		return s.answerFlow(ctx, *b.known, b.decision, f.current)
	case b.resp != nil:
		s.metrics.Idempotency(f.scope.Operation, "replayed")
		return *b.resp, nil
	}
	if w.recovered {
		s.metrics.Idempotency(f.scope.Operation, "recovered")
	} else {
		s.metrics.Idempotency(f.scope.Operation, "new")
	}
	return s.run(ctx, acct, w, actorOf(ctx))
}

// began is what transaction 1 decided: a provider call to make (work), an
// answer already complete (resp), or a known key to answer from.
type began struct {
	work     *work
	resp     *idempotency.Response
	known    *idempotency.Record
	decision idempotency.Decision
}

// begin is transaction 1: it reserves the key and starts the attempt, takes
// over the key's attempt, or returns the known key record to answer from.
func (s *Service) begin(ctx context.Context, tx Tx, f flow) (began, error) {
	now := s.clock()
	attemptID := s.newID("att")
	res := Reservation{Scope: f.scope, Fingerprint: f.fp, LeaseUntil: now.Add(s.lease),
		PaymentID: f.paymentID, AttemptID: attemptID, Now: now}
	tx.ReadAhead(f.ahead)
	keyID, reserved, err := tx.KeyReserve(ctx, res)
	if err != nil {
		return began{}, err
	}
	if !reserved {
		rec, err := tx.KeyLock(ctx, f.scope)
		if err != nil {
			return began{}, err
		}
		if d := idempotency.Decide(rec, f.fp, now); d != idempotency.Recover {
			return began{known: &rec, decision: d}, nil
		}
		w, resp, err := s.takeOver(ctx, tx, rec, now, f.render)
		return began{work: w, resp: resp}, err
	}
	p, a, err := f.start(ctx, tx, now, f.paymentID, attemptID)
	if err != nil {
		return began{}, err
	}
	if a != nil {
		return began{work: &work{scope: f.scope, payment: p, attempt: a, render: f.render}}, nil
	}
	// The attempt id reserved with the key was never written.
	if err := tx.KeyDetachAttempt(ctx, keyID); err != nil {
		return began{}, err
	}
	resp, err := f.render(ctx, tx, p, nil)
	if err != nil {
		return began{}, err
	}
	return began{resp: &resp}, tx.KeyComplete(ctx, keyID, resp.Status, resp.Body, now)
}

// render is the default answer: the payment when nothing was sent, else the
// attempt's operation.
func (s *Service) render(ctx context.Context, tx Tx, p *Payment, a *Attempt) (idempotency.Response, error) {
	if a != nil {
		return s.respond(ctx, tx, p, a)
	}
	body, err := json.Marshal(p)
	return idempotency.Response{Status: http.StatusOK, Body: body}, err
}

// answerFlow answers a known key; current renders a purged response.
func (s *Service) answerFlow(ctx context.Context, rec idempotency.Record, d idempotency.Decision,
	current func(ctx context.Context, rec idempotency.Record) (idempotency.Response, error)) (idempotency.Response, error) {
	if d == idempotency.ReplayCurrent && current != nil {
		s.metrics.Idempotency(rec.Scope.Operation, "replayed")
		return current(ctx, rec)
	}
	return s.answer(ctx, rec, d)
}

// answer turns a decision on a known key into the response or error.
func (s *Service) answer(ctx context.Context, rec idempotency.Record, d idempotency.Decision) (idempotency.Response, error) {
	op := rec.Scope.Operation
	switch d {
	case idempotency.Replay:
		s.metrics.Idempotency(op, "replayed")
		return idempotency.Response{Status: rec.ResponseStatus, Body: rec.ResponseBody, Replayed: true}, nil
	case idempotency.ReplayCurrent:
		s.metrics.Idempotency(op, "replayed")
		p, err := s.store.PaymentGet(ctx, rec.Scope.AccountID, rec.PaymentID)
		if err != nil {
			return idempotency.Response{}, err
		}
		body, err := json.Marshal(p)
		return idempotency.Response{Status: http.StatusOK, Body: body, Replayed: true}, err
	case idempotency.Reused:
		s.metrics.Idempotency(op, "reused")
		return idempotency.Response{}, Errorf(CodeIdempotencyKeyReused, "this Idempotency-Key was used with a different request")
	case idempotency.InUse:
		s.metrics.Idempotency(op, "in_use")
		return idempotency.Response{}, errInUse
	}
	return idempotency.Response{}, fmt.Errorf("payment: no answer for decision %d", d)
}

var errInUse = Errorf(CodeIdempotencyKeyInUse, "a request with this Idempotency-Key is in progress; retry later")

// takeOver makes this request the owner of a key whose holder died or whose
// outcome is unknown. It never starts a new attempt: it recovers the one the
// key already refers to. When the outcome became known meanwhile
// (reconciler, webhook), it completes the key with the current state. While
// the reconciler holds the attempt, the caller is told to retry.
func (s *Service) takeOver(ctx context.Context, tx Tx, rec idempotency.Record, now time.Time, render renderer) (*work, *idempotency.Response, error) {
	p, err := tx.PaymentLock(ctx, rec.Scope.AccountID, rec.PaymentID)
	if err != nil {
		return nil, nil, err
	}
	a, err := tx.AttemptGet(ctx, rec.AttemptID)
	if err != nil {
		return nil, nil, err
	}
	if a.Status.Answered() {
		resp, err := render(ctx, tx, p, a)
		if err != nil {
			return nil, nil, err
		}
		return nil, &resp, tx.KeyComplete(ctx, rec.ID, resp.Status, resp.Body, now)
	}
	if a.LeaseExpiresAt != nil && now.Before(*a.LeaseExpiresAt) {
		return nil, nil, errInUse
	}
	until := now.Add(s.lease)
	if err := tx.KeyTakeLease(ctx, rec.ID, until, now); err != nil {
		return nil, nil, err
	}
	if err := tx.AttemptSetLease(ctx, a.ID, until, now); err != nil {
		return nil, nil, err
	}
	a.LeaseExpiresAt = &until
	return &work{recovered: true, scope: rec.Scope, payment: p, attempt: a, render: render}, nil, nil
}

// run calls the provider for an owned attempt, outside any transaction,
// then records the outcome and completes the key in transaction 2.
func (s *Service) run(ctx context.Context, acct Account, w *work, actor string) (idempotency.Response, error) {
	res := s.call(ctx, acct, w.payment, w.attempt, w.recovered)
	var (
		resp    idempotency.Response
		settled *Payment
	)
	err := s.settle(ctx, w.attempt, func(ctx context.Context, tx Tx) error {
		now := s.clock()
		// Lock order everywhere: key, then payment. The payment and the
		// attempt (read by record) travel with the key.
		tx.ReadAhead(ReadAhead{LockPayment: &PaymentRef{AccountID: acct.ID, ID: w.payment.ID}, Attempt: w.attempt.ID})
		rec, err := tx.KeyLock(ctx, w.scope)
		if err != nil {
			return err
		}
		p, err := tx.PaymentLock(ctx, acct.ID, w.payment.ID)
		if err != nil {
			return err
		}
		if rec.State == idempotency.StateCompleted {
			// A concurrent owner (after a lease takeover, or the reconciler)
			// finished first with the same provider key.
			resp = idempotency.Response{Status: rec.ResponseStatus, Body: rec.ResponseBody}
			return nil
		}
		a, err := s.record(ctx, tx, p, w.attempt.ID, res, actor, now)
		if err != nil {
			return err
		}
		settled = p
		if resp, err = w.render(ctx, tx, p, a); err != nil {
			return err
		}
		if a.Status.Answered() {
			return tx.KeyComplete(ctx, rec.ID, resp.Status, resp.Body, now)
		}
		return tx.KeyMarkUnknown(ctx, rec.ID, now)
	})
	if err == nil {
		s.sendReleases(ctx, acct, settled, actor)
	}
	return resp, err
}

// settleTries bounds how often the transaction that records a provider's
// answer is tried.
const settleTries = 3

// settle runs the transaction that records a provider's answer: even if the
// client has gone away, each try bounded by the settle timeout so a stalled
// database cannot hold the request for ever, and retried before giving up.
// When every try fails the answer is not lost for good: the attempt's lease
// expires and recovery asks the provider again with the same key.
func (s *Service) settle(ctx context.Context, a *Attempt, fn func(ctx context.Context, tx Tx) error) error {
	base := context.WithoutCancel(ctx)
	var err error
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(base, s.settleTimeout)
		err = s.store.WithTx(tctx, func(tx Tx) error { return fn(tctx, tx) })
		cancel()
		var domain *Error
		if err == nil || errors.As(err, &domain) || try == settleTries {
			break
		}
		time.Sleep(time.Duration(try) * 100 * time.Millisecond)
	}
	if err != nil {
		s.log.ErrorContext(ctx, "provider answer not recorded; recovery will ask the provider again with the same key",
			slog.String("attempt_id", a.ID), slog.String("payment_id", a.PaymentID), slog.String("error", err.Error()))
	}
	return err
}

// respond renders the answer of an attempt's operation in the payment's
// current state: 201/200 when the outcome is known, 202 while it is not,
// and 409 provider_rejected, with the provider's code, when the provider
// refused a capture, cancel or refund.
func (s *Service) respond(ctx context.Context, tx Tx, p *Payment, a *Attempt) (idempotency.Response, error) {
	if a.Operation == OpCancel && a.Status == AttemptFailed && movedOn(p, a) {
		// The refusal showed the customer had just paid: the payment took
		// the provider's state, and a paid payment cannot be canceled.
		e := &Error{Code: CodeInvalidState, PaymentID: p.ID,
			Message: "the payment is " + string(p.Status) + " at the provider; it can no longer be canceled"}
		body, err := e.encodeStored()
		return idempotency.Response{Status: http.StatusConflict, Body: body}, err
	}
	if a.Operation != OpAuthorize && a.Status == AttemptFailed {
		e := &Error{Code: CodeProviderRejected, PaymentID: p.ID, ProviderCode: a.FailureCode,
			Message: "the provider refused to " + verbOf(a.Operation) + " the payment; nothing was changed"}
		body, err := e.encodeStored()
		return idempotency.Response{Status: http.StatusConflict, Body: body}, err
	}
	var (
		v      any = p
		status int
	)
	switch a.Operation {
	case OpAuthorize:
		// A payment that waits for the customer has its answer: 201 with
		// what the customer must do.
		status = http.StatusCreated
		if p.Status == StatusProcessing || p.Status == StatusUnknown {
			status = http.StatusAccepted
		}
	case OpRefund:
		r, err := tx.RefundByAttempt(ctx, a.ID)
		if err != nil {
			return idempotency.Response{}, err
		}
		v, status = r, http.StatusCreated
		if !a.Status.Resolved() {
			status = http.StatusAccepted
		}
	default:
		status = http.StatusOK
		if !a.Status.Resolved() {
			status = http.StatusAccepted
		}
	}
	body, err := json.Marshal(v)
	return idempotency.Response{Status: status, Body: body}, err
}

func verbOf(op Operation) string {
	switch op {
	case OpCapture:
		return "capture"
	case OpCancel:
		return "cancel"
	}
	return "refund"
}
