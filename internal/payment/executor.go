package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/logging"
)

// The money path. Every mutation of a payment (create, capture, cancel,
// refund, an operator's replay or resolution) takes the same three steps,
// each a function with a typed result:
//
//	reserve       transaction 1: the client key and the attempt it refers to
//	callProvider  no transaction: the provider, with the attempt's derived key
//	settle        transaction 2: the outcome, the payment and the stored answer
//
// Execute runs them in order; a key that already has its answer is answered
// before any of them.

// Key is the client key a mutation runs under: scoped per account and
// operation, bound to the fingerprint of the normalized request.
type Key struct {
	Scope       idempotency.Scope
	Fingerprint []byte
	// BodyHash is the raw request's hash for an operation whose request is
	// its body alone (a create); nil for the others.
	BodyHash []byte
	// PaymentID is the payment the mutation is about; for a create, the id
	// the new payment will have.
	PaymentID string
}

// NewKey scopes a client key and binds it to the normalized request.
func NewKey(accountID, operation, key, paymentID string, normalized any) (Key, error) {
	fp, err := idempotency.Fingerprint(operation, normalized)
	if err != nil {
		return Key{}, err
	}
	scope := idempotency.Scope{AccountID: accountID, Operation: operation, KeyHash: idempotency.HashKey(key)}
	return Key{Scope: scope, Fingerprint: fp, PaymentID: paymentID}, nil
}

// Mutation is what one kind of change does in the money path's steps.
type Mutation interface {
	// Start runs in transaction 1, under the key it has just reserved: it
	// checks the payment's state under its lock and writes the attempt to
	// send, or completes the change without one.
	Start(ctx context.Context, tx Tx, r Reserved) (Started, error)
	// Answer renders the key's answer from the payment's current state, in
	// the transaction that completes the key. a is the attempt the key
	// refers to; nil when the change needed no provider call.
	Answer(ctx context.Context, tx Tx, p *Payment, a *Attempt) (idempotency.Answer, error)
}

// Preparer is a Mutation that must learn something before its key is
// reserved, outside any transaction. recovering: the key exists and its
// attempt is about to be recovered, not started.
type Preparer interface {
	Prepare(ctx context.Context, recovering bool) error
}

// PurgedAnswerer is a Mutation whose answer, once purged by retention, is
// not the payment as it is now.
type PurgedAnswerer interface {
	AnswerPurged(ctx context.Context, rec idempotency.Record) (idempotency.Answer, error)
}

// numbered is a Mutation whose Start takes the order's next attempt number
// of an operation: the store reads it with the key's reservation.
type numbered interface {
	numbered() (orderID string, op Operation)
}

// Reserved is what Start is given: the time of transaction 1 and the ids
// reserved with the key.
type Reserved struct {
	Now       time.Time
	PaymentID string
	AttemptID string
	// NextAttempt is the order's next attempt number, read with the
	// reservation for a numbered mutation (a create); 0 otherwise.
	NextAttempt int
}

// StartKind says what transaction 1 of a new key did.
type StartKind int

const (
	// StartSend: the attempt is written; the provider is to be called.
	StartSend StartKind = iota + 1
	// StartDone: the change is complete without a provider call; the key
	// completes at once with its answer.
	StartDone
)

// Started is the result of Start.
type Started struct {
	Kind    StartKind
	Payment *Payment
	Attempt *Attempt
}

// Send starts an attempt: the provider is called with it next.
func Send(p *Payment, a *Attempt) Started { return Started{Kind: StartSend, Payment: p, Attempt: a} }

// Done completes a change that needs no provider call.
func Done(p *Payment) Started { return Started{Kind: StartDone, Payment: p} }

// Execute runs a mutation under its client key: reserve, callProvider,
// settle. A known key is answered from what it stored, or recovered: its
// attempt is taken over, never started again.
func (s *Service) Execute(ctx context.Context, acct Account, k Key, m Mutation) (idempotency.Answer, error) {
	known, err := s.lookUp(ctx, k.Scope)
	if err != nil {
		return idempotency.Answer{}, err
	}
	return s.execute(ctx, acct, k, m, known)
}

// lookup is a key's record read without a lock before the request runs;
// found is false when the scope had none.
type lookup struct {
	rec   idempotency.Record
	found bool
}

// lookUp reads the key's record: the replay fast path's one statement.
func (s *Service) lookUp(ctx context.Context, sc idempotency.Scope) (lookup, error) {
	rec, err := s.store.IdempotencyKeyGet(ctx, sc)
	switch {
	case err == nil:
		return lookup{rec: rec, found: true}, nil
	case errors.Is(err, ErrNotFound):
		return lookup{}, nil
	}
	return lookup{}, err
}

// execute is Execute with the key's record already read.
func (s *Service) execute(ctx context.Context, acct Account, k Key, m Mutation, known lookup) (idempotency.Answer, error) {
	recovering := false
	if known.found {
		ctx = logging.WithPayment(ctx, acct.ID, known.rec.PaymentID)
		d := idempotency.Decide(known.rec, k.Fingerprint, s.clock())
		if d != idempotency.Recover {
			return s.answerKnown(ctx, known.rec, d, m)
		}
		recovering = true
	}
	if p, ok := m.(Preparer); ok {
		if err := p.Prepare(ctx, recovering); err != nil {
			return idempotency.Answer{}, err
		}
	}
	r, err := s.reserve(ctx, k, m)
	if err != nil {
		return idempotency.Answer{}, err
	}
	switch r.kind {
	case reservedKnown:
		ctx = logging.WithPayment(ctx, acct.ID, r.record.PaymentID)
		return s.answerKnown(ctx, r.record, r.decision, m)
	case reservedAnswered:
		s.metrics.Idempotency(k.Scope.Operation, "replayed")
		return r.answer, nil
	}
	s.metrics.Idempotency(k.Scope.Operation, r.work.metric())
	w := r.work
	ctx = logging.WithPayment(ctx, acct.ID, w.payment.ID)
	for {
		out := s.callThroughCircuit(ctx, acct, w)
		st, err := s.settle(ctx, acct, w, out)
		if err != nil {
			return idempotency.Answer{}, err
		}
		if st.next == nil {
			s.SendReleases(ctx, acct, st.payment, w.actor)
			return st.answer, nil
		}
		w = *st.next // a failover: the next provider's attempt
	}
}

// work is a provider call this request owns: the key's lease is held.
type work struct {
	scope     idempotency.Scope
	payment   *Payment
	attempt   *Attempt
	recovered bool
	mutation  Mutation
	actor     string
}

func (w work) metric() string {
	if w.recovered {
		return "recovered"
	}
	return "new"
}

// reservedKind says what transaction 1 decided.
type reservedKind int

const (
	// reservedOwned: this request owns an attempt to send (work).
	reservedOwned reservedKind = iota + 1
	// reservedAnswered: the key completed in the transaction (answer).
	reservedAnswered
	// reservedKnown: another request reserved the key first; answer from
	// its record and decision.
	reservedKnown
)

// reserved is the result of reserve.
type reserved struct {
	kind     reservedKind
	work     work
	answer   idempotency.Answer
	record   idempotency.Record
	decision idempotency.Decision
}

// reserve is transaction 1: it reserves the key under its unique constraint
// and starts the attempt, or takes over the attempt of a key whose holder
// died or whose outcome is unknown. A crash right after it leaves the key
// in progress under its lease and the attempt processing: a retry after the
// lease, or the reconciler, recovers that attempt with the same provider key.
func (s *Service) reserve(ctx context.Context, k Key, m Mutation) (reserved, error) {
	for try := 0; ; try++ {
		r, err := inTx(ctx, s.store, func(tx Tx) (reserved, error) { return s.reserveTx(ctx, tx, k, m) })
		if errors.Is(err, ErrAttemptNumberTaken) && try < 3 {
			continue // a concurrent transaction took the attempt number
		}
		return r, err
	}
}

func (s *Service) reserveTx(ctx context.Context, tx Tx, k Key, m Mutation) (reserved, error) {
	at := Reserved{Now: s.clock(), PaymentID: k.PaymentID, AttemptID: s.newID("att")}
	res := Reservation{Scope: k.Scope, Fingerprint: k.Fingerprint, BodyHash: k.BodyHash,
		LeaseUntil: at.Now.Add(s.lease), PaymentID: k.PaymentID, AttemptID: at.AttemptID, Now: at.Now}
	var (
		keyID int64
		ok    bool
		err   error
	)
	if n, isNumbered := m.(numbered); isNumbered {
		orderID, op := n.numbered()
		keyID, ok, at.NextAttempt, err = tx.IdempotencyKeyReserveNumbered(ctx, res, orderID, op)
	} else {
		keyID, ok, err = tx.IdempotencyKeyReserve(ctx, res)
	}
	if err != nil {
		return reserved{}, err
	}
	if !ok {
		return s.takeOver(ctx, tx, k, m, at.Now)
	}
	st, err := m.Start(ctx, tx, at)
	if err != nil {
		return reserved{}, err
	}
	if st.Kind == StartSend {
		return reserved{kind: reservedOwned, work: work{scope: k.Scope, payment: st.Payment, attempt: st.Attempt,
			mutation: m, actor: actorOf(ctx)}}, nil
	}
	// The attempt id reserved with the key was never written.
	if err := tx.IdempotencyKeyDetachAttempt(ctx, keyID); err != nil {
		return reserved{}, err
	}
	ans, err := m.Answer(ctx, tx, st.Payment, nil)
	if err != nil {
		return reserved{}, err
	}
	return reserved{kind: reservedAnswered, answer: ans}, tx.IdempotencyKeyComplete(ctx, keyID, ans, at.Now)
}

// takeOver handles a key another request reserved first. Unless it is to be
// recovered, it is answered from its record. Recovering never starts a new
// attempt: it takes over the one the key refers to. When that outcome
// became known meanwhile (reconciler, webhook), the key completes with the
// current state; while the reconciler holds the attempt, the caller is told
// to retry.
func (s *Service) takeOver(ctx context.Context, tx Tx, k Key, m Mutation, now time.Time) (reserved, error) {
	rec, err := tx.IdempotencyKeyGetForUpdate(ctx, k.Scope)
	if err != nil {
		return reserved{}, err
	}
	if d := idempotency.Decide(rec, k.Fingerprint, now); d != idempotency.Recover {
		return reserved{kind: reservedKnown, record: rec, decision: d}, nil
	}
	p, err := tx.PaymentGetByIDForUpdate(ctx, rec.Scope.AccountID, rec.PaymentID)
	if err != nil {
		return reserved{}, err
	}
	a, err := tx.AttemptGetByID(ctx, rec.AttemptID)
	if err != nil {
		return reserved{}, err
	}
	if a.Status.Answered() {
		ans, err := m.Answer(ctx, tx, p, a)
		if err != nil {
			return reserved{}, err
		}
		return reserved{kind: reservedAnswered, answer: ans}, tx.IdempotencyKeyComplete(ctx, rec.ID, ans, now)
	}
	if a.LeaseExpiresAt != nil && now.Before(*a.LeaseExpiresAt) {
		return reserved{}, errInUse
	}
	until := now.Add(s.lease)
	if err := tx.IdempotencyKeyTakeLease(ctx, rec.ID, until, now); err != nil {
		return reserved{}, err
	}
	if err := tx.AttemptSetLease(ctx, a.ID, until, now); err != nil {
		return reserved{}, err
	}
	a.LeaseExpiresAt = &until
	return reserved{kind: reservedOwned, work: work{scope: rec.Scope, payment: p, attempt: a, recovered: true,
		mutation: m, actor: actorOf(ctx)}}, nil
}

// callProvider is the provider call, outside any transaction, with the
// attempt's derived key; a recovery asks before it re-sends (see call). A
// crash during or right after it leaves what reserve left, and the outcome
// with the provider alone: recovery re-sends the same key, which the
// provider replays, or looks the object up once the key may be forgotten.
func (s *Service) callProvider(ctx context.Context, acct Account, w work) Outcome {
	return s.CallProvider(ctx, acct, w.payment, w.attempt, w.recovered)
}

// settled is the result of settle.
type settled struct {
	answer idempotency.Answer
	// payment as recorded; nil when another owner completed the key first.
	payment *Payment
	// next is the attempt a failover started at the next provider; the
	// key waits on it, and there is no answer yet.
	next *work
}

// settle is transaction 2: it records the outcome on the attempt and the
// payment and stores the key's answer (or marks the key unknown while the
// outcome is). A crash right after it, before the answer reaches the
// client, leaves a completed key that the client's retry replays byte for
// byte; an unknown one is recovered by the retry or the reconciler.
func (s *Service) settle(ctx context.Context, acct Account, w work, out Outcome) (settled, error) {
	return settleTx(ctx, s, w.attempt, func(ctx context.Context, tx Tx) (settled, error) {
		now := s.clock()
		if nw, err := s.failOverAtOnce(ctx, tx, w, out, now); nw != nil || err != nil {
			return settled{next: nw}, err
		}
		rec, p, a, err := tx.IdempotencyKeyGetForUpdateWithPayment(ctx, w.scope, w.payment.ID, w.attempt.ID)
		if err != nil {
			return settled{}, err
		}
		if rec.State == idempotency.StateCompleted {
			// A concurrent owner (after a lease takeover, or the reconciler)
			// finished first with the same provider key.
			return settled{answer: idempotency.Answer{Kind: rec.ResponseKind, Body: rec.ResponseBody}}, nil
		}
		if fo, ok := w.mutation.(failingOver); ok && provedNothing(w, out) && stillOurs(w.attempt, a) {
			if next := fo.nextProvider(p); next != "" {
				nw, err := s.failOver(ctx, tx, rec.ID, w, p, a, out, next, now)
				return settled{next: nw}, err
			}
		}
		a, err = s.applyTo(ctx, tx, p, a, out, w.actor, now)
		if err != nil {
			return settled{}, err
		}
		ans, err := w.mutation.Answer(ctx, tx, p, a)
		if err != nil {
			return settled{}, err
		}
		if a.Status.Answered() {
			err = tx.IdempotencyKeyComplete(ctx, rec.ID, ans, now)
		} else {
			err = tx.IdempotencyKeyMarkUnknown(ctx, rec.ID, now)
		}
		return settled{answer: ans, payment: p}, err
	})
}

// settleTries bounds how often the transaction that records a provider's
// answer is tried.
const settleTries = 3

// settleTx runs a transaction that records a provider's answer: even if the
// client has gone away, each try bounded by the settle timeout so a stalled
// database cannot hold the request for ever, and retried before giving up.
// When every try fails the answer is not lost for good: the attempt's lease
// expires and recovery asks the provider again with the same key.
func settleTx[T any](ctx context.Context, s *Service, a *Attempt, fn func(ctx context.Context, tx Tx) (T, error)) (T, error) {
	base := context.WithoutCancel(ctx)
	var (
		v   T
		err error
	)
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(base, s.settleTimeout)
		v, err = inTx(tctx, s.store, func(tx Tx) (T, error) { return fn(tctx, tx) })
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
	return v, err
}

// inTx runs fn in one transaction and returns its result once committed.
func inTx[T any](ctx context.Context, st Store, fn func(Tx) (T, error)) (T, error) {
	var v T
	err := st.WithTx(ctx, func(tx Tx) (err error) {
		v, err = fn(tx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// settleAttempt is settleTx for a transaction with no result.
func (s *Service) settleAttempt(ctx context.Context, a *Attempt, fn func(ctx context.Context, tx Tx) error) error {
	_, err := settleTx(ctx, s, a, func(ctx context.Context, tx Tx) (struct{}, error) { return struct{}{}, fn(ctx, tx) })
	return err
}

// ClaimLease is how long a recovery claim holds an attempt: at least
// IN_PROGRESS_LEASE, and always the whole provider call (which the call
// caps at the lease) plus one try at recording its answer. A recording that
// needs more tries happens after the send it guards, and the provider
// replays a key re-sent by whoever claims next.
func (s *Service) ClaimLease() time.Duration {
	return max(s.lease, s.providerTimeout+s.settleTimeout+time.Second)
}

// Recorded is what SettleClaimed recorded.
type Recorded struct {
	// Payment as recorded; Attempt as stored after the outcome.
	Payment *Payment
	Attempt *Attempt
	// At is the time of the transaction that recorded it.
	At time.Time
	// ByOther: another path (a webhook, the client's retry) resolved the
	// attempt while the provider was being asked; that path owns the
	// resolution.
	ByOther bool
}

// SettleClaimed is settle for an attempt a recovery claimed (the
// reconciler, an operator's reconcile) rather than a client key: it
// records the outcome under the payment's lock, runs also in the same
// transaction, and completes the client key waiting on the attempt, if
// any, once it has its answer. A crash right after it leaves the attempt
// recorded and the waiting key completed; a crash before it leaves the
// attempt to the next claim, which asks the provider again with the same
// key.
func (s *Service) SettleClaimed(ctx context.Context, acct Account, a *Attempt, out Outcome, actor string,
	also func(ctx context.Context, tx Tx, r Recorded) error) (Recorded, error) {
	r, err := settleTx(ctx, s, a, func(ctx context.Context, tx Tx) (Recorded, error) {
		now := s.clock()
		rec, err := tx.IdempotencyKeyGetByAttemptForUpdate(ctx, a.ID)
		hasKey := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Recorded{}, err
		}
		p, err := tx.PaymentGetByIDForUpdate(ctx, acct.ID, a.PaymentID)
		if err != nil {
			return Recorded{}, err
		}
		cur, err := tx.AttemptGetByID(ctx, a.ID)
		if err != nil {
			return Recorded{}, err
		}
		stored, err := s.Apply(ctx, tx, p, a.ID, out, actor, now)
		if err != nil {
			return Recorded{}, err
		}
		r := Recorded{Payment: p, Attempt: stored, At: now, ByOther: cur.Status.Resolved()}
		if err := also(ctx, tx, r); err != nil {
			return Recorded{}, err
		}
		if !stored.Status.Answered() || !hasKey || rec.State == idempotency.StateCompleted {
			return r, nil
		}
		return r, s.CompleteKey(ctx, tx, rec, p, stored, now)
	})
	if err == nil && a.Operation == OpAuthorize {
		s.SendReleases(ctx, acct, r.Payment, actor)
	}
	return r, err
}

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
