package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
)

// PaymentStore implements payment.Store.
type PaymentStore struct{ db *DB }

// NewPaymentStore returns the payment store on db.
func NewPaymentStore(db *DB) *PaymentStore { return &PaymentStore{db: db} }

var _ payment.Store = (*PaymentStore)(nil)

// WithTx runs fn in one READ COMMITTED transaction: each statement sees
// rows committed before it started, which is what lets a request that lost
// the race for a key read the winner's record after waiting on its lock.
func (s *PaymentStore) WithTx(ctx context.Context, fn func(payment.Tx) error) error {
	return withTx(ctx, s.db, func(tx pgx.Tx) error {
		ptx := tx.(*pipeTx)
		return fn(&paymentTx{tx: ptx, q: s.db.q.WithTx(ptx), river: s.db.river})
	})
}

// IdempotencyKeyGet reads a key record without a lock: the replay fast path.
func (s *PaymentStore) IdempotencyKeyGet(ctx context.Context, sc idempotency.Scope) (idempotency.Record, error) {
	row, err := s.db.q.IdempotencyKeyGet(ctx, dbsqlc.IdempotencyKeyGetParams{
		AccountID: sc.AccountID, Operation: sc.Operation, KeyHash: sc.KeyHash})
	if err != nil {
		return idempotency.Record{}, translate(err)
	}
	return keyFromRow(row), nil
}

// PaymentGetByID returns one of the account's payments.
func (s *PaymentStore) PaymentGetByID(ctx context.Context, accountID, id string) (*payment.Payment, error) {
	row, err := s.db.q.PaymentGetByID(ctx, dbsqlc.PaymentGetByIDParams{AccountID: accountID, ID: id})
	if err != nil {
		return nil, translate(err)
	}
	return paymentFromRow(row)
}

// PaymentListByOrder returns the account's payments of an order, oldest first.
func (s *PaymentStore) PaymentListByOrder(ctx context.Context, accountID, orderID string, limit int) ([]*payment.Payment, error) {
	rows, err := s.db.q.PaymentListByOrder(ctx, dbsqlc.PaymentListByOrderParams{
		AccountID: accountID, OrderID: orderID, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	return paymentsFromRows(rows)
}

// PaymentGetLiveByOrder returns the order's live payment.
func (s *PaymentStore) PaymentGetLiveByOrder(ctx context.Context, accountID, orderID string) (*payment.Payment, error) {
	row, err := s.db.q.PaymentGetLiveByOrder(ctx, dbsqlc.PaymentGetLiveByOrderParams{AccountID: accountID, OrderID: orderID})
	if err != nil {
		return nil, translate(err)
	}
	return paymentFromRow(row)
}

type paymentTx struct {
	tx    *pipeTx
	q     *dbsqlc.Queries
	river *River
	ahead ahead
	// locked holds the version of each payment this transaction locked
	// (PaymentGetByIDForUpdate), kept current through its own updates: under the lock
	// nobody else changes it.
	locked map[string]int64
}

func (t *paymentTx) lockedAt(id string, version int64) {
	if t.locked == nil {
		t.locked = map[string]int64{}
	}
	t.locked[id] = version
}

func (t *paymentTx) IdempotencyKeyReserve(ctx context.Context, r payment.Reservation) (int64, bool, error) {
	t.endpointsAhead(r.Scope.AccountID)
	row, err := t.q.IdempotencyKeyReserve(ctx, dbsqlc.IdempotencyKeyReserveParams{
		AccountID: r.Scope.AccountID, Operation: r.Scope.Operation, KeyHash: r.Scope.KeyHash,
		Fingerprint: r.Fingerprint, BodyHash: r.BodyHash, LeaseExpiresAt: &r.LeaseUntil,
		PaymentID: strPtr(r.PaymentID), AttemptID: strPtr(r.AttemptID), Now: r.Now,
	})
	t.arrived()
	if err == pgx.ErrNoRows {
		return 0, false, nil
	}
	return row.ID, err == nil, translate(err)
}

// IdempotencyKeyReserveNumbered reserves the key and reads the order's
// next attempt number and the account's webhook endpoints in the same
// statement. When the key exists, the statement returns no row and reads
// nothing: the caller takes over the existing key instead.
func (t *paymentTx) IdempotencyKeyReserveNumbered(ctx context.Context, r payment.Reservation, orderID string, op payment.Operation) (int64, bool, int, error) {
	row, err := t.q.IdempotencyKeyReserveNumbered(ctx, dbsqlc.IdempotencyKeyReserveNumberedParams{
		AccountID: r.Scope.AccountID, Operation: r.Scope.Operation, KeyHash: r.Scope.KeyHash,
		Fingerprint: r.Fingerprint, BodyHash: r.BodyHash, LeaseExpiresAt: &r.LeaseUntil,
		PaymentID: strPtr(r.PaymentID), AttemptID: strPtr(r.AttemptID), Now: r.Now,
		OrderID: orderID, AttemptOperation: string(op),
	})
	t.arrived()
	if err == pgx.ErrNoRows {
		return 0, false, 0, nil
	}
	if err != nil {
		return 0, false, 0, translate(err)
	}
	return row.ID, true, int(row.NextAttempt), t.endpointsRead(r.Scope.AccountID, row.Endpoints)
}

// IdempotencyKeyGetForUpdateWithPayment locks the key and the payment in
// one statement, which also reads the account's webhook endpoints; the
// attempt is read by the next statement, in the same round trip, so that
// it is read after the locks are held.
func (t *paymentTx) IdempotencyKeyGetForUpdateWithPayment(ctx context.Context, sc idempotency.Scope, paymentID, attemptID string) (idempotency.Record, *payment.Payment, *payment.Attempt, error) {
	t.readAhead(reads{attempt: attemptID})
	row, err := t.q.IdempotencyKeyGetForUpdateWithPayment(ctx, dbsqlc.IdempotencyKeyGetForUpdateWithPaymentParams{
		AccountID: sc.AccountID, Operation: sc.Operation, KeyHash: sc.KeyHash, PaymentID: paymentID})
	t.arrived()
	if err != nil {
		return idempotency.Record{}, nil, nil, translate(err)
	}
	rec := keyFromRow(row.IdempotencyKey)
	if err := t.endpointsRead(sc.AccountID, row.Endpoints); err != nil {
		return rec, nil, nil, err
	}
	t.lockedAt(row.Payment.ID, row.Payment.Version)
	p, err := paymentFromRow(row.Payment)
	if err != nil {
		return rec, nil, nil, err
	}
	a, err := t.AttemptGetByID(ctx, attemptID)
	return rec, p, a, err
}

func (t *paymentTx) IdempotencyKeyGetForUpdate(ctx context.Context, sc idempotency.Scope) (idempotency.Record, error) {
	t.endpointsAhead(sc.AccountID)
	row, err := t.q.IdempotencyKeyGetForUpdate(ctx, dbsqlc.IdempotencyKeyGetForUpdateParams{
		AccountID: sc.AccountID, Operation: sc.Operation, KeyHash: sc.KeyHash})
	t.arrived()
	if err != nil {
		return idempotency.Record{}, translate(err)
	}
	return keyFromRow(row), nil
}

func (t *paymentTx) IdempotencyKeyTakeLease(ctx context.Context, id int64, until, now time.Time) error {
	return translate(t.q.IdempotencyKeyTakeLease(ctx, dbsqlc.IdempotencyKeyTakeLeaseParams{ID: id, LeaseExpiresAt: &until, Now: now}))
}

func (t *paymentTx) IdempotencyKeyMarkUnknown(ctx context.Context, id int64, now time.Time) error {
	return translate(t.q.IdempotencyKeyMarkUnknown(ctx, dbsqlc.IdempotencyKeyMarkUnknownParams{ID: id, Now: now}))
}

func (t *paymentTx) IdempotencyKeyComplete(ctx context.Context, id int64, ans idempotency.Answer, now time.Time) error {
	kind, st := string(ans.Kind), legacyStatus(ans.Kind)
	return translate(t.q.IdempotencyKeyComplete(ctx, dbsqlc.IdempotencyKeyCompleteParams{
		ID: id, ResponseKind: &kind, ResponseStatus: &st, ResponseBody: ans.Body, Now: &now}))
}

func (t *paymentTx) IdempotencyKeyMoveAttempt(ctx context.Context, id int64, attemptID string, leaseUntil, now time.Time) error {
	return translate(t.q.IdempotencyKeyMoveAttempt(ctx, dbsqlc.IdempotencyKeyMoveAttemptParams{
		ID: id, AttemptID: &attemptID, LeaseExpiresAt: &leaseUntil, Now: now}))
}

func (t *paymentTx) PaymentMoveProvider(ctx context.Context, p *payment.Payment, now time.Time) error {
	return translate(t.q.PaymentMoveProvider(ctx, dbsqlc.PaymentMoveProviderParams{
		ID: p.ID, Provider: p.Provider, Attempt: int32(p.Attempt), Now: now}))
}

func (t *paymentTx) IdempotencyKeyDetachAttempt(ctx context.Context, id int64) error {
	return translate(t.q.IdempotencyKeyDetachAttempt(ctx, id))
}

func (t *paymentTx) AttemptNextNumber(ctx context.Context, accountID, orderID string, op payment.Operation) (int, error) {
	n, err := t.q.AttemptNextNumber(ctx, dbsqlc.AttemptNextNumberParams{AccountID: accountID, OrderID: orderID, Operation: string(op)})
	return int(n), translate(err)
}

func (t *paymentTx) PaymentInsert(ctx context.Context, p *payment.Payment) error {
	arg, err := paymentInsertParams(p)
	if err != nil {
		return err
	}
	return translate(t.q.PaymentInsert(ctx, arg))
}

// PaymentInsertWithAttempt writes a new payment and its first attempt in
// one statement.
func (t *paymentTx) PaymentInsertWithAttempt(ctx context.Context, p *payment.Payment, a *payment.Attempt) error {
	pa, err := paymentInsertParams(p)
	if err != nil {
		return err
	}
	aa := attemptInsertParams(a)
	if aa.AccountID != pa.AccountID || aa.PaymentID != pa.ID || aa.OrderID != pa.OrderID {
		return errors.New("postgres: the attempt is not of the payment")
	}
	return translate(t.q.PaymentInsertWithAttempt(ctx, dbsqlc.PaymentInsertWithAttemptParams{
		ID: pa.ID, AccountID: pa.AccountID, OrderID: pa.OrderID, Attempt: pa.Attempt,
		Amount: pa.Amount, Currency: pa.Currency, CaptureMethod: pa.CaptureMethod,
		PaymentMethod: pa.PaymentMethod, CustomerID: pa.CustomerID, Description: pa.Description,
		Metadata: pa.Metadata, MethodOptions: pa.MethodOptions, Status: pa.Status, Provider: pa.Provider, Now: pa.Now,
		AttemptID: aa.ID, Operation: aa.Operation, Number: aa.Number, ProviderKey: aa.ProviderKey, Request: aa.Request,
		LeaseExpiresAt: aa.LeaseExpiresAt, AttemptProvider: aa.Provider, AttemptNow: aa.Now,
	}))
}

func paymentInsertParams(p *payment.Payment) (dbsqlc.PaymentInsertParams, error) {
	// The payment reads back as stored: "" is Stripe.
	p.Provider = payment.ProviderOf(p.Provider)
	md, err := json.Marshal(nonNil(p.Metadata))
	if err != nil {
		return dbsqlc.PaymentInsertParams{}, err
	}
	opts, err := json.Marshal(p.Options)
	if err != nil {
		return dbsqlc.PaymentInsertParams{}, err
	}
	return dbsqlc.PaymentInsertParams{
		ID: p.ID, AccountID: p.AccountID, OrderID: p.OrderID, Attempt: int32(p.Attempt),
		Amount: p.Amount, Currency: p.Currency, CaptureMethod: p.CaptureMethod,
		PaymentMethod: p.PaymentMethod, CustomerID: p.CustomerID, Description: p.Description,
		Metadata: md, MethodOptions: opts, Status: string(p.Status), Provider: p.Provider, Now: p.CreatedAt,
	}, nil
}

func (t *paymentTx) PaymentGetByIDForUpdate(ctx context.Context, accountID, id string) (*payment.Payment, error) {
	row, err := t.q.PaymentGetByIDForUpdate(ctx, dbsqlc.PaymentGetByIDForUpdateParams{AccountID: accountID, ID: id})
	if err != nil {
		return nil, translate(err)
	}
	t.lockedAt(row.ID, row.Version)
	return paymentFromRow(row)
}

func paymentUpdateParams(p *payment.Payment) (dbsqlc.PaymentUpdateStateParams, error) {
	var next []byte
	if p.NextAction != nil {
		b, err := json.Marshal(p.NextAction)
		if err != nil {
			return dbsqlc.PaymentUpdateStateParams{}, err
		}
		next = b
	}
	return dbsqlc.PaymentUpdateStateParams{
		ID: p.ID, Status: string(p.Status), Attempt: int32(p.Attempt),
		ProviderPaymentID: strPtr(p.ProviderPaymentID), AmountCaptured: p.AmountCaptured,
		AmountRefunded: p.AmountRefunded, ProviderAmountRefunded: p.ProviderAmountRefunded, FailureCode: strPtr(p.FailureCode),
		FailureMessage: strPtr(p.FailureMessage), NextAction: next, ClientSecret: strPtr(p.ClientSecret),
		ActionExpiresAt: p.ActionExpiresAt, Now: p.UpdatedAt,
	}, nil
}

// AttemptUpdateOutcomeWithPayment writes an attempt's outcome and its
// payment's next state: in one statement when this transaction holds the
// payment locked at its version, else as the two updates.
func (t *paymentTx) AttemptUpdateOutcomeWithPayment(ctx context.Context, a *payment.Attempt, p *payment.Payment) error {
	v, ok := t.locked[p.ID]
	if !ok || v != p.Version {
		if err := t.AttemptUpdateOutcome(ctx, a); err != nil {
			return err
		}
		return t.PaymentUpdateState(ctx, p)
	}
	pa, err := paymentUpdateParams(p)
	if err != nil {
		return err
	}
	err = t.q.AttemptUpdateOutcomeWithPayment(ctx, dbsqlc.AttemptUpdateOutcomeWithPaymentParams{
		ID: pa.ID, Status: pa.Status, Attempt: pa.Attempt, ProviderPaymentID: pa.ProviderPaymentID,
		AmountCaptured: pa.AmountCaptured, AmountRefunded: pa.AmountRefunded, ProviderAmountRefunded: pa.ProviderAmountRefunded,
		FailureCode: pa.FailureCode, FailureMessage: pa.FailureMessage, NextAction: pa.NextAction,
		ClientSecret: pa.ClientSecret, ActionExpiresAt: pa.ActionExpiresAt, Now: pa.Now,
		AttemptID: a.ID, AttemptStatus: string(a.Status), ProviderObjectID: strPtr(a.ProviderObjectID),
		AttemptFailureCode: strPtr(a.FailureCode), AttemptFailureMessage: strPtr(a.FailureMessage),
		AttemptNow: a.UpdatedAt, NextReconcileAt: a.NextReconcileAt,
	})
	if err != nil {
		return translate(err)
	}
	p.Version = v + 1
	t.locked[p.ID] = p.Version
	return nil
}

func (t *paymentTx) PaymentUpdateState(ctx context.Context, p *payment.Payment) error {
	arg, err := paymentUpdateParams(p)
	if err != nil {
		return err
	}
	if v, ok := t.locked[p.ID]; ok && v == p.Version {
		// Locked here at this version: the next is known, and the update
		// waits for the next round trip.
		if err := t.q.PaymentUpdateStateLocked(ctx, dbsqlc.PaymentUpdateStateLockedParams(arg)); err != nil {
			return translate(err)
		}
		p.Version = v + 1
		t.locked[p.ID] = p.Version
		return nil
	}
	row, err := t.q.PaymentUpdateState(ctx, arg)
	if err != nil {
		return translate(err)
	}
	p.Version = row.Version
	if _, ok := t.locked[p.ID]; ok {
		t.locked[p.ID] = p.Version
	}
	return nil
}

func (t *paymentTx) PaymentSetDisputes(ctx context.Context, p *payment.Payment) error {
	b, err := payment.EncodeDisputes(p.Disputes)
	if err != nil {
		return err
	}
	v, err := t.q.PaymentSetDisputes(ctx, dbsqlc.PaymentSetDisputesParams{ID: p.ID, Disputes: b, Now: p.UpdatedAt})
	if err != nil {
		return translate(err)
	}
	p.Version = v
	if _, ok := t.locked[p.ID]; ok {
		t.locked[p.ID] = v
	}
	return nil
}

func (t *paymentTx) AttemptInsert(ctx context.Context, a *payment.Attempt) error {
	return translate(t.q.AttemptInsert(ctx, attemptInsertParams(a)))
}

func attemptInsertParams(a *payment.Attempt) dbsqlc.AttemptInsertParams {
	a.Provider = payment.ProviderOf(a.Provider)
	return dbsqlc.AttemptInsertParams{
		ID: a.ID, AccountID: a.AccountID, PaymentID: a.PaymentID, OrderID: a.OrderID,
		Operation: string(a.Operation), Number: int32(a.Number), ProviderKey: a.ProviderKey,
		Request: a.Request, LeaseExpiresAt: a.LeaseExpiresAt, Provider: a.Provider, Now: a.CreatedAt,
	}
}

func (t *paymentTx) AttemptGetByID(ctx context.Context, id string) (*payment.Attempt, error) {
	var (
		row dbsqlc.Attempt
		err error
	)
	if a, ok := take(&t.ahead.attempt, t.fresh(), t.ahead.attemptOf == id); ok {
		row, err = a.v, a.err
	} else {
		row, err = t.q.AttemptGetByID(ctx, id)
	}
	if err != nil {
		return nil, translate(err)
	}
	return attemptFromRow(row), nil
}

func (t *paymentTx) AttemptSetLease(ctx context.Context, id string, until, now time.Time) error {
	return translate(t.q.AttemptSetLease(ctx, dbsqlc.AttemptSetLeaseParams{ID: id, LeaseExpiresAt: &until, Now: now}))
}

func (t *paymentTx) AttemptUpdateOutcome(ctx context.Context, a *payment.Attempt) error {
	err := t.q.AttemptUpdateOutcome(ctx, dbsqlc.AttemptUpdateOutcomeParams{
		ID: a.ID, Status: string(a.Status), ProviderObjectID: strPtr(a.ProviderObjectID),
		FailureCode: strPtr(a.FailureCode), FailureMessage: strPtr(a.FailureMessage), Now: a.UpdatedAt,
		NextReconcileAt: a.NextReconcileAt})
	return translate(err)
}

func (t *paymentTx) AuditInsert(ctx context.Context, e payment.AuditEntry) error {
	details, err := json.Marshal(withRequestID(ctx, e.Details))
	if err != nil {
		return err
	}
	return translate(t.q.AuditInsert(ctx, dbsqlc.AuditInsertParams{
		AccountID: e.AccountID, PaymentID: e.PaymentID, At: e.At, Actor: e.Actor,
		Action: e.Action, Reason: e.Reason, Details: details}))
}

// AuditEventInsert writes the audit entry and the event of one change in
// one statement.
func (t *paymentTx) AuditEventInsert(ctx context.Context, e payment.AuditEntry, ev payment.Event) error {
	details, err := json.Marshal(withRequestID(ctx, e.Details))
	if err != nil {
		return err
	}
	return translate(t.q.AuditEventInsert(ctx, dbsqlc.AuditEventInsertParams{
		AccountID: e.AccountID, PaymentID: e.PaymentID, At: e.At, Actor: e.Actor,
		Action: e.Action, Reason: e.Reason, Details: details,
		EventID: ev.ID, EventAccountID: ev.AccountID, EventPaymentID: strPtr(ev.PaymentID), Type: ev.Type,
		Payload: ev.Payload, CreatedAt: ev.CreatedAt}))
}

// withRequestID adds the id of the request that made an audit entry (the
// client's X-Request-Id, or the one the service gave it) to its details,
// so the console's timeline can lead from a row to the request's log
// lines. A background job's entries have none.
func withRequestID(ctx context.Context, details map[string]any) map[string]any {
	id := logging.RequestID(ctx)
	if id == "" {
		return details
	}
	if _, set := details["request_id"]; set {
		return details
	}
	out := make(map[string]any, len(details)+1)
	maps.Copy(out, details)
	out["request_id"] = id
	return out
}

func (t *paymentTx) EventInsert(ctx context.Context, e payment.Event) error {
	return translate(t.q.EventInsert(ctx, dbsqlc.EventInsertParams{
		ID: e.ID, AccountID: e.AccountID, PaymentID: strPtr(e.PaymentID), Type: e.Type,
		Payload: e.Payload, CreatedAt: e.CreatedAt}))
}

// WebhooksEnqueue is the outbox: called right after EventInsert, in the
// same transaction.
func (t *paymentTx) WebhooksEnqueue(ctx context.Context, e payment.Event) error {
	if ids, ok := t.matching(e.AccountID, e.Type); ok {
		return enqueueIDs(ctx, t.river, t.tx, e.AccountID, e.ID, ids)
	}
	return enqueueTx(ctx, t.river, t.tx, t.q, e.AccountID, e.ID, e.Type)
}

func keyFromRow(r dbsqlc.IdempotencyKey) idempotency.Record {
	rec := idempotency.Record{
		ID:          r.ID,
		Scope:       idempotency.Scope{AccountID: r.AccountID, Operation: r.Operation, KeyHash: r.KeyHash},
		Fingerprint: r.Fingerprint, BodyHash: r.BodyHash, State: idempotency.State(r.State), LeaseExpiresAt: r.LeaseExpiresAt,
		ResponseBody: r.ResponseBody, PaymentID: deref(r.PaymentID), AttemptID: deref(r.AttemptID),
		CreatedAt: r.CreatedAt, CompletedAt: r.CompletedAt, Purged: r.PurgedAt != nil,
	}
	switch {
	case r.ResponseKind != nil:
		rec.ResponseKind = idempotency.Kind(*r.ResponseKind)
	case r.ResponseStatus != nil:
		rec.ResponseKind = kindOfLegacyStatus(*r.ResponseStatus)
	}
	return rec
}

// legacyStatus is the response_status the release before the answer kind
// reads: the HTTP status the kind stood for. For a refusal it only needs a
// status of 400 or more; the stored error's code picks the real one.
func legacyStatus(k idempotency.Kind) int32 {
	switch k {
	case idempotency.KindCreated:
		return 201
	case idempotency.KindAccepted:
		return 202
	case idempotency.KindRefused:
		return 409
	}
	return 200
}

// kindOfLegacyStatus reads an answer stored before its kind was: by the
// status it was stored with.
func kindOfLegacyStatus(st int32) idempotency.Kind {
	switch {
	case st >= 400:
		return idempotency.KindRefused
	case st == 201:
		return idempotency.KindCreated
	case st == 202:
		return idempotency.KindAccepted
	}
	return idempotency.KindOK
}

func paymentFromRow(r dbsqlc.Payment) (*payment.Payment, error) {
	md := map[string]string{}
	if err := json.Unmarshal(r.Metadata, &md); err != nil {
		return nil, err
	}
	var opts payment.MethodOptions
	if err := json.Unmarshal(r.MethodOptions, &opts); err != nil {
		return nil, err
	}
	var next *payment.NextAction
	if len(r.NextAction) > 0 {
		next = new(payment.NextAction)
		if err := json.Unmarshal(r.NextAction, next); err != nil {
			return nil, err
		}
	}
	disputes, err := payment.DecodeDisputes(r.Disputes)
	if err != nil {
		return nil, err
	}
	return &payment.Payment{
		Disputes: disputes, Version: r.Version,
		ID: r.ID, AccountID: r.AccountID, OrderID: r.OrderID, Attempt: int(r.Attempt), Provider: r.Provider,
		Amount: r.Amount, Currency: r.Currency, CaptureMethod: r.CaptureMethod,
		PaymentMethod: r.PaymentMethod, CustomerID: r.CustomerID, Description: r.Description,
		Metadata: md, Status: payment.Status(r.Status), ProviderPaymentID: deref(r.ProviderPaymentID),
		AmountCaptured: r.AmountCaptured, AmountRefunded: r.AmountRefunded, ProviderAmountRefunded: r.ProviderAmountRefunded,
		FailureCode: deref(r.FailureCode), FailureMessage: deref(r.FailureMessage),
		Options: opts, NextAction: next, ClientSecret: deref(r.ClientSecret), ActionExpiresAt: r.ActionExpiresAt,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}, nil
}

func paymentsFromRows(rows []dbsqlc.Payment) ([]*payment.Payment, error) {
	out := make([]*payment.Payment, 0, len(rows))
	for _, r := range rows {
		p, err := paymentFromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func attemptFromRow(r dbsqlc.Attempt) *payment.Attempt {
	return &payment.Attempt{
		ID: r.ID, AccountID: r.AccountID, PaymentID: r.PaymentID, OrderID: r.OrderID,
		Operation: payment.Operation(r.Operation), Number: int(r.Number), ProviderKey: r.ProviderKey,
		Status: payment.AttemptStatus(r.Status), Request: r.Request,
		ProviderObjectID: deref(r.ProviderObjectID), LeaseExpiresAt: r.LeaseExpiresAt,
		FailureCode: deref(r.FailureCode), FailureMessage: deref(r.FailureMessage),
		ReconcileTries: int(r.ReconcileTries), NextReconcileAt: r.NextReconcileAt,
		Provider: r.Provider, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// CountByStatus counts payments by status, for metrics, from the counts a
// trigger keeps (migration 00011), never by scanning payments. It first
// folds the deltas written since the last call, so they stay few.
func (s *PaymentStore) CountByStatus(ctx context.Context) (map[string]int64, error) {
	if err := s.db.q.PaymentStatusCountsFold(ctx); err != nil {
		return nil, translate(err)
	}
	rows, err := s.db.q.PaymentCountByStatus(ctx)
	if err != nil {
		return nil, translate(err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.StatusText] = r.N
	}
	return out, nil
}

func (t *paymentTx) PaymentFailOver(ctx context.Context, f payment.FailOver) (bool, error) {
	details, err := json.Marshal(f.Audit.Details)
	if err != nil {
		return false, err
	}
	if f.Failed.LeaseExpiresAt == nil || f.Next.LeaseExpiresAt == nil {
		return false, nil
	}
	p, a := f.Payment, f.Next
	_, err = t.q.PaymentFailOver(ctx, dbsqlc.PaymentFailOverParams{
		AccountID: p.AccountID, PaymentID: p.ID, Now: f.Now, Actor: f.Audit.Actor, Details: details,
		KeyOperation: f.Scope.Operation, KeyHash: f.Scope.KeyHash, FromProvider: payment.ProviderOf(p.Provider),
		FailureCode: f.FailureCode, FailureMessage: f.FailureMessage,
		FailedAttemptID: f.Failed.ID, FailedLease: *f.Failed.LeaseExpiresAt,
		OrderID: a.OrderID, Operation: string(a.Operation), Number: int32(a.Number), Provider: payment.ProviderOf(a.Provider),
		AttemptID: a.ID, ProviderKey: a.ProviderKey, Request: a.Request, LeaseExpiresAt: *a.LeaseExpiresAt,
	})
	if err == pgx.ErrNoRows {
		return false, nil
	}
	return err == nil, translate(err)
}
