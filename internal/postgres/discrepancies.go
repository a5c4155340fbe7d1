package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
)

var _ operations.Store = (*PaymentStore)(nil)

// PaymentListFinalChanged pages final payments changed since a time, by
// (updated_at, id).
func (s *PaymentStore) PaymentListFinalChanged(ctx context.Context, since time.Time, after operations.StuckCursor, limit int) ([]*payment.Payment, error) {
	rows, err := s.db.q.PaymentListFinalChanged(ctx, dbsqlc.PaymentListFinalChangedParams{
		Since: since, AfterAt: after.UpdatedAt, AfterID: after.ID, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	return paymentsFromRows(rows)
}

// DiscrepancyUpsert records a difference the audit found; false when an
// operator already resolved this exact difference.
func (s *PaymentStore) DiscrepancyUpsert(ctx context.Context, d *payment.Discrepancy) (*payment.Discrepancy, bool, error) {
	row, err := s.db.q.DiscrepancyUpsert(ctx, dbsqlc.DiscrepancyUpsertParams{
		ID: d.ID, AccountID: d.AccountID, PaymentID: d.PaymentID, Kind: string(d.Kind),
		Ours: d.Ours, Theirs: d.Theirs, Now: d.LastCheckedAt})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, translate(err)
	}
	return discrepancyFromRow(row), true, nil
}

// DiscrepancyGetByID reads one discrepancy.
func (s *PaymentStore) DiscrepancyGetByID(ctx context.Context, id string) (*payment.Discrepancy, error) {
	row, err := s.db.q.DiscrepancyGetByID(ctx, id)
	if err != nil {
		return nil, translate(err)
	}
	return discrepancyFromRow(row), nil
}

// DiscrepancyList pages discrepancies by id.
func (s *PaymentStore) DiscrepancyList(ctx context.Context, q operations.DiscrepancyQuery) ([]*payment.Discrepancy, error) {
	rows, err := s.db.q.DiscrepancyList(ctx, dbsqlc.DiscrepancyListParams{
		Status: string(q.Status), PaymentID: q.PaymentID, AfterID: q.AfterID, MaxRows: int32(q.Limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]*payment.Discrepancy, 0, len(rows))
	for _, r := range rows {
		out = append(out, discrepancyFromRow(r))
	}
	return out, nil
}

// DiscrepancyCountOpen counts open discrepancies, for the metric.
func (s *PaymentStore) DiscrepancyCountOpen(ctx context.Context) (int64, error) {
	n, err := s.db.q.DiscrepancyCountOpen(ctx)
	return n, translate(err)
}

func (t *paymentTx) DiscrepancyGetByIDForUpdate(ctx context.Context, id string) (*payment.Discrepancy, error) {
	row, err := t.q.DiscrepancyGetByIDForUpdate(ctx, id)
	if err != nil {
		return nil, translate(err)
	}
	return discrepancyFromRow(row), nil
}

// DiscrepancyClaim claims an open discrepancy for one resolve;
// payment.ErrNotFound when it cannot be claimed.
func (s *PaymentStore) DiscrepancyClaim(ctx context.Context, id string, keyHash []byte, until, now time.Time) (*payment.Discrepancy, error) {
	row, err := s.db.q.DiscrepancyClaim(ctx, dbsqlc.DiscrepancyClaimParams{ID: id, KeyHash: keyHash, Until: &until, Now: &now})
	if err != nil {
		return nil, translate(err)
	}
	return discrepancyFromRow(row), nil
}

// DiscrepancyReleaseClaim ends the claim of the resolve whose key hashes to
// keyHash, if it still holds one.
func (s *PaymentStore) DiscrepancyReleaseClaim(ctx context.Context, id string, keyHash []byte) error {
	return translate(s.db.q.DiscrepancyReleaseClaim(ctx, dbsqlc.DiscrepancyReleaseClaimParams{ID: id, KeyHash: keyHash}))
}

func (t *paymentTx) DiscrepancyStartRefund(ctx context.Context, id string, r payment.DiscrepancyResolution, adopt []byte, reason string) (*payment.Discrepancy, error) {
	row, err := t.q.DiscrepancyStartRefund(ctx, dbsqlc.DiscrepancyStartRefundParams{ID: id, RefundID: &r.RefundID,
		Actor: &r.Actor, Reason: &reason, Now: &r.At, Adopt: adopt})
	if err != nil {
		return nil, translate(err)
	}
	return discrepancyFromRow(row), nil
}

func (t *paymentTx) DiscrepancyByRefundForUpdate(ctx context.Context, refundID string) (*payment.Discrepancy, error) {
	row, err := t.q.DiscrepancyByRefundForUpdate(ctx, &refundID)
	if err != nil {
		return nil, translate(err)
	}
	return discrepancyFromRow(row), nil
}

func (t *paymentTx) DiscrepancySetResolutionStatus(ctx context.Context, id, status string) (*payment.Discrepancy, error) {
	row, err := t.q.DiscrepancySetResolutionStatus(ctx, dbsqlc.DiscrepancySetResolutionStatusParams{ID: id, ResolutionStatus: &status})
	if err != nil {
		return nil, translate(err)
	}
	return discrepancyFromRow(row), nil
}

func (t *paymentTx) DiscrepancyResolve(ctx context.Context, id, actor string, action payment.ResolveAction, now time.Time) (*payment.Discrepancy, error) {
	res := string(action)
	row, err := t.q.DiscrepancyResolve(ctx, dbsqlc.DiscrepancyResolveParams{ID: id, Actor: actor, Resolution: &res, Now: &now})
	if err != nil {
		return nil, translate(err)
	}
	return discrepancyFromRow(row), nil
}

func discrepancyFromRow(r dbsqlc.Discrepancy) *payment.Discrepancy {
	d := &payment.Discrepancy{ID: r.ID, AccountID: r.AccountID, PaymentID: r.PaymentID,
		Kind: payment.DiscrepancyKind(r.Kind), Ours: r.Ours, Theirs: r.Theirs, Status: payment.DiscrepancyStatus(r.Status),
		FirstSeenAt: r.FirstSeenAt, LastCheckedAt: r.LastCheckedAt, Adopt: r.ResolutionAdopt,
		ClaimKeyHash: r.ClaimKeyHash, ClaimedUntil: r.ClaimedUntil}
	if r.Resolution != nil {
		res := &payment.DiscrepancyResolution{Action: payment.ResolveAction(*r.Resolution)}
		res.RefundID, res.Status, res.Actor = deref(r.ResolutionRefundID), deref(r.ResolutionStatus), deref(r.ResolutionActor)
		res.Reason = deref(r.ResolutionReason)
		if r.ResolutionAt != nil {
			res.At = *r.ResolutionAt
		}
		d.Resolution = res
	}
	return d
}
