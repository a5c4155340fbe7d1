package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres/internal/dbsqlc"
	"github.com/acmepay/payments/internal/reconcile"
	"github.com/jackc/pgx/v5"
)

// PaymentGetAnyAccount reads a payment of any account.
func (s *PaymentStore) PaymentGetAnyAccount(ctx context.Context, id string) (*payment.Payment, error) {
	row, err := s.db.q.PaymentGetAnyAccount(ctx, id)
	if err != nil {
		return nil, translate(err)
	}
	return paymentFromRow(row)
}

// PaymentListStuck pages payments of any account in the given statuses.
func (s *PaymentStore) PaymentListStuck(ctx context.Context, q operations.StuckQuery) ([]operations.StuckPayment, error) {
	sts := make([]string, len(q.Statuses))
	for i, st := range q.Statuses {
		sts[i] = string(st)
	}
	rows, err := s.db.q.PaymentListStuck(ctx, dbsqlc.PaymentListStuckParams{
		Statuses: sts, UpdatedBefore: q.UpdatedBefore, AlertBefore: q.AlertBefore,
		AccountID: q.AccountID, AfterAt: q.After.UpdatedAt, AfterID: q.After.ID, MaxRows: int32(q.Limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]operations.StuckPayment, 0, len(rows))
	for _, r := range rows {
		p, err := paymentFromRow(r.Payment)
		if err != nil {
			return nil, err
		}
		out = append(out, operations.StuckPayment{Payment: p, NeedsAttention: r.NeedsAttention})
	}
	return out, nil
}

// AttemptListByPayment lists a payment's attempts, oldest first.
func (s *PaymentStore) AttemptListByPayment(ctx context.Context, paymentID string) ([]*payment.Attempt, error) {
	rows, err := s.db.q.AttemptListByPayment(ctx, paymentID)
	return attemptsFromRows(rows), translate(err)
}

// AttemptListUnresolvedByPayment lists a payment's attempts whose outcome is
// not known.
func (s *PaymentStore) AttemptListUnresolvedByPayment(ctx context.Context, paymentID string) ([]*payment.Attempt, error) {
	rows, err := s.db.q.AttemptListUnresolvedByPayment(ctx, paymentID)
	return attemptsFromRows(rows), translate(err)
}

// AuditListByPayment returns a payment's audit trail in order.
func (s *PaymentStore) AuditListByPayment(ctx context.Context, paymentID string) ([]payment.AuditEntry, error) {
	rows, err := s.db.q.AuditListByPayment(ctx, paymentID)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]payment.AuditEntry, 0, len(rows))
	for _, r := range rows {
		e := payment.AuditEntry{AccountID: r.AccountID, PaymentID: r.PaymentID, At: r.At, Actor: r.Actor, Action: r.Action, Reason: r.Reason}
		if err := json.Unmarshal(r.Details, &e.Details); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// AttemptClaimNext leases the next due unresolved attempt for one
// reconciler and schedules its next claim, in one transaction.
func (s *PaymentStore) AttemptClaimNext(ctx context.Context, due reconcile.Due, now, leaseUntil time.Time, nextDue func(tries int) time.Time) (*payment.Attempt, error) {
	var a *payment.Attempt
	err := withTx(ctx, s.db, func(tx pgx.Tx) error {
		q := s.db.q.WithTx(tx)
		row, err := q.AttemptLockNextDue(ctx, dbsqlc.AttemptLockNextDueParams{
			Now: &now, UpdatedBefore: due.UpdatedBefore, DueBefore: &due.Before})
		if err != nil {
			return translate(err)
		}
		next := nextDue(int(row.ReconcileTries) + 1)
		row, err = q.AttemptScheduleClaim(ctx, dbsqlc.AttemptScheduleClaimParams{ID: row.ID, LeaseUntil: &leaseUntil, NextReconcileAt: &next})
		if err != nil {
			return translate(err)
		}
		a = attemptFromRow(row)
		return nil
	})
	return a, err
}

// AttemptCountNeedingAttentionByProvider counts unresolved attempts
// created before createdBefore, by provider; a provider with none is
// absent.
func (s *PaymentStore) AttemptCountNeedingAttentionByProvider(ctx context.Context, createdBefore time.Time) (map[string]int, error) {
	rows, err := s.db.q.AttemptCountNeedingAttentionByProvider(ctx, createdBefore)
	if err != nil {
		return nil, translate(err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Provider] = int(r.Attempts)
	}
	return out, nil
}

// AttemptClaimByID leases one unresolved attempt nobody holds.
func (s *PaymentStore) AttemptClaimByID(ctx context.Context, id string, now, leaseUntil time.Time) (*payment.Attempt, error) {
	row, err := s.db.q.AttemptClaimByID(ctx, dbsqlc.AttemptClaimByIDParams{ID: id, Now: &now, LeaseUntil: &leaseUntil})
	if err != nil {
		return nil, translate(err)
	}
	return attemptFromRow(row), nil
}

// RefundGetByAttempt reads the refund an attempt sends.
func (s *PaymentStore) RefundGetByAttempt(ctx context.Context, attemptID string) (*payment.Refund, error) {
	return refundByAttempt(ctx, s.db.q, attemptID)
}

// RefundGetByID reads one refund of the account.
func (s *PaymentStore) RefundGetByID(ctx context.Context, accountID, id string) (*payment.Refund, error) {
	row, err := s.db.q.RefundGetByID(ctx, dbsqlc.RefundGetByIDParams{AccountID: accountID, ID: id})
	if err != nil {
		return nil, translate(err)
	}
	return refundFromRow(row), nil
}

// RefundListByPaymentAfter reads a page of the account's refunds of a
// payment, oldest first, after the refund after (nil: from the first).
func (s *PaymentStore) RefundListByPaymentAfter(ctx context.Context, accountID, paymentID string, after *payment.Refund, limit int) ([]*payment.Refund, error) {
	arg := dbsqlc.RefundListByPaymentAfterParams{AccountID: accountID, PaymentID: paymentID,
		AfterCreatedAt: time.Time{}, MaxRows: int32(limit)}
	if after != nil {
		arg.AfterCreatedAt, arg.AfterID = after.CreatedAt, after.ID
	}
	rows, err := s.db.q.RefundListByPaymentAfter(ctx, arg)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]*payment.Refund, 0, len(rows))
	for _, r := range rows {
		out = append(out, refundFromRow(r))
	}
	return out, nil
}

// RefundListByPayment reads a payment's refunds, oldest first.
func (s *PaymentStore) RefundListByPayment(ctx context.Context, paymentID string) ([]*payment.Refund, error) {
	rows, err := s.db.q.RefundListByPayment(ctx, paymentID)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]*payment.Refund, 0, len(rows))
	for _, r := range rows {
		out = append(out, refundFromRow(r))
	}
	return out, nil
}

func (t *paymentTx) IdempotencyKeyGetByAttemptForUpdate(ctx context.Context, attemptID string) (idempotency.Record, error) {
	row, err := t.q.IdempotencyKeyGetByAttemptForUpdate(ctx, &attemptID)
	if err != nil {
		return idempotency.Record{}, translate(err)
	}
	return keyFromRow(row), nil
}

func (t *paymentTx) AttemptLatestByPayment(ctx context.Context, paymentID string, op payment.Operation) (*payment.Attempt, error) {
	row, err := t.q.AttemptLatestByPayment(ctx, dbsqlc.AttemptLatestByPaymentParams{PaymentID: paymentID, Operation: string(op)})
	if err != nil {
		return nil, translate(err)
	}
	return attemptFromRow(row), nil
}

func (t *paymentTx) AttemptCountUnresolvedByPaymentOps(ctx context.Context, paymentID string, ops ...payment.Operation) (int, error) {
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = string(op)
	}
	n, err := t.q.AttemptCountUnresolvedByPaymentOps(ctx, dbsqlc.AttemptCountUnresolvedByPaymentOpsParams{PaymentID: paymentID, Operations: names})
	return int(n), translate(err)
}

func (t *paymentTx) AttemptCancelHoldingOrder(ctx context.Context, accountID, orderID string) (string, error) {
	id, err := t.q.AttemptCancelHoldingOrder(ctx, dbsqlc.AttemptCancelHoldingOrderParams{AccountID: accountID, OrderID: orderID})
	return id, translate(err)
}

func (t *paymentTx) RefundInsert(ctx context.Context, r *payment.Refund) error {
	_, err := t.q.RefundInsert(ctx, dbsqlc.RefundInsertParams{ID: r.ID, AccountID: r.AccountID, PaymentID: r.PaymentID,
		AttemptID: r.AttemptID, Amount: r.Amount, Now: r.CreatedAt})
	return translate(err)
}

func (t *paymentTx) RefundGetByAttempt(ctx context.Context, attemptID string) (*payment.Refund, error) {
	return refundByAttempt(ctx, t.q, attemptID)
}

func (t *paymentTx) RefundSumPending(ctx context.Context, paymentID string) (int64, error) {
	n, err := t.q.RefundSumPending(ctx, paymentID)
	return n, translate(err)
}

func (t *paymentTx) RefundSumSucceeded(ctx context.Context, paymentID string) (int64, error) {
	n, err := t.q.RefundSumSucceeded(ctx, paymentID)
	return n, translate(err)
}

func (t *paymentTx) RefundUpdateOutcome(ctx context.Context, r *payment.Refund) error {
	_, err := t.q.RefundUpdateOutcome(ctx, dbsqlc.RefundUpdateOutcomeParams{ID: r.ID, Status: string(r.Status),
		ProviderRefundID: strPtr(r.ProviderRefundID), Now: r.UpdatedAt})
	return translate(err)
}

func refundByAttempt(ctx context.Context, q *dbsqlc.Queries, attemptID string) (*payment.Refund, error) {
	r, err := q.RefundGetByAttempt(ctx, attemptID)
	if err != nil {
		return nil, translate(err)
	}
	return refundFromRow(r), nil
}

func refundFromRow(r dbsqlc.Refund) *payment.Refund {
	return &payment.Refund{ID: r.ID, AccountID: r.AccountID, PaymentID: r.PaymentID, AttemptID: r.AttemptID, Amount: r.Amount,
		Status: payment.RefundStatus(r.Status), ProviderRefundID: deref(r.ProviderRefundID), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

func attemptsFromRows(rows []dbsqlc.Attempt) []*payment.Attempt {
	out := make([]*payment.Attempt, 0, len(rows))
	for _, r := range rows {
		out = append(out, attemptFromRow(r))
	}
	return out
}

// EventListAfter reads an account's events after a position, in (xid, seq)
// order, below the horizon of running transactions.
func (s *PaymentStore) EventListAfter(ctx context.Context, accountID string, after payment.FeedPosition, limit int) ([]payment.FeedEvent, error) {
	rows, err := s.db.q.EventListAfter(ctx, dbsqlc.EventListAfterParams{AccountID: accountID,
		AfterXid: strconv.FormatUint(after.Xid, 10), AfterSeq: after.Seq, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]payment.FeedEvent, 0, len(rows))
	for _, r := range rows {
		x, err := strconv.ParseUint(r.XidText, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("postgres: event xid %q: %w", r.XidText, err)
		}
		out = append(out, payment.FeedEvent{Position: payment.FeedPosition{Xid: x, Seq: r.Seq}, Payload: r.Payload})
	}
	return out, nil
}

// PaymentGetByProviderID finds the account's payment of a provider object.
func (s *PaymentStore) PaymentGetByProviderID(ctx context.Context, accountID, providerPaymentID string) (*payment.Payment, error) {
	row, err := s.db.q.PaymentGetByProviderID(ctx, dbsqlc.PaymentGetByProviderIDParams{AccountID: accountID, ProviderPaymentID: &providerPaymentID})
	if err != nil {
		return nil, translate(err)
	}
	return paymentFromRow(row)
}

// The store's transactions record the receipts of provider events.
var _ inbound.Tx = (*paymentTx)(nil)

// ProviderEventReceiptInsert stores the receipt of a provider event; false
// when its event id was already received.
func (t *paymentTx) ProviderEventReceiptInsert(ctx context.Context, r inbound.Receipt) (bool, error) {
	_, err := t.q.ProviderEventReceiptInsert(ctx, dbsqlc.ProviderEventReceiptInsertParams{AccountID: r.AccountID, EventID: r.EventID,
		Type: r.Type, Outcome: r.Outcome, PaymentID: strPtr(r.PaymentID), ReceivedAt: r.ReceivedAt})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, translate(err)
}

// AccountFeedCursorAdvance records the cursor an account's consumer passed
// back, and when, if it is further than the one recorded.
func (s *PaymentStore) AccountFeedCursorAdvance(ctx context.Context, accountID string, pos payment.FeedPosition, at time.Time) error {
	return translate(s.db.q.AccountFeedCursorAdvance(ctx, dbsqlc.AccountFeedCursorAdvanceParams{ID: accountID,
		Xid: strconv.FormatUint(pos.Xid, 10), Seq: pos.Seq, ReadAt: &at}))
}

// FeedConsumerWindow is how long after its consumer last moved the cursor
// an account's unread events still count in EventBacklog: a consumer that
// stopped shows for this long, an account never read never does.
const FeedConsumerWindow = 7 * 24 * time.Hour

// EventBacklog counts the events not yet fetched by the consumers that
// moved their cursor within FeedConsumerWindow, and the age of the oldest.
func (s *PaymentStore) EventBacklog(ctx context.Context, now time.Time) (int64, time.Duration, error) {
	r, err := s.db.q.EventBacklog(ctx, dbsqlc.EventBacklogParams{Now: now, ActiveSince: new(now.Add(-FeedConsumerWindow))})
	if err != nil {
		return 0, 0, translate(err)
	}
	return r.Unread, time.Duration(r.OldestAgeSeconds * float64(time.Second)), nil
}

// ServerFeedLag is how long the events feed may lag commits right now: the
// age of the oldest transaction that holds its horizon back.
func (s *PaymentStore) ServerFeedLag(ctx context.Context) (time.Duration, error) {
	secs, err := s.db.q.ServerFeedLag(ctx)
	if err != nil {
		return 0, translate(err)
	}
	return time.Duration(secs * float64(time.Second)), nil
}
