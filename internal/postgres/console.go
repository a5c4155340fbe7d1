package postgres

import (
	"context"
	"time"

	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres/internal/dbsqlc"
)

// ConsoleStore holds the reads of the operations console that the payment
// service has no use for.
type ConsoleStore struct{ db *DB }

// NewConsoleStore returns the console's reads on db.
func NewConsoleStore(db *DB) *ConsoleStore { return &ConsoleStore{db: db} }

// PaymentCountWaitingByAge counts unknown, processing, requires_action and
// pending payments by how long they have been in their status.
func (s *ConsoleStore) PaymentCountWaitingByAge(ctx context.Context, now time.Time) ([]payment.AgeCount, error) {
	rows, err := s.db.q.PaymentCountWaitingByAge(ctx, now)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]payment.AgeCount, len(rows))
	for i, r := range rows {
		out[i] = payment.AgeCount{Status: payment.Status(r.Status), Age: r.Age, N: r.N}
	}
	return out, nil
}

// PaymentCountByStatus counts payments by status.
func (s *ConsoleStore) PaymentCountByStatus(ctx context.Context) (map[string]int64, error) {
	return NewPaymentStore(s.db).CountByStatus(ctx)
}

// EventListByPayment lists a payment's events in feed order, at most
// limit, without their snapshots.
func (s *ConsoleStore) EventListByPayment(ctx context.Context, accountID, paymentID string, limit int) ([]payment.Event, error) {
	rows, err := s.db.q.EventListByPayment(ctx, dbsqlc.EventListByPaymentParams{AccountID: accountID, PaymentID: &paymentID, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]payment.Event, len(rows))
	for i, r := range rows {
		out[i] = payment.Event{AccountID: accountID, PaymentID: paymentID, ID: r.ID, Type: r.Type, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// ProviderEventReceiptListByPayment lists the receipts of the provider's
// events about a payment, oldest first, at most limit.
func (s *ConsoleStore) ProviderEventReceiptListByPayment(ctx context.Context, accountID, paymentID string, limit int) ([]inbound.Receipt, error) {
	rows, err := s.db.q.ProviderEventReceiptListByPayment(ctx, dbsqlc.ProviderEventReceiptListByPaymentParams{
		AccountID: accountID, PaymentID: &paymentID, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]inbound.Receipt, len(rows))
	for i, r := range rows {
		out[i] = inbound.Receipt{AccountID: accountID, PaymentID: paymentID, EventID: r.EventID, Type: r.Type, Outcome: r.Outcome, ReceivedAt: r.ReceivedAt}
	}
	return out, nil
}

// DiscrepancyCountOpenByKind counts open discrepancies by kind.
func (s *ConsoleStore) DiscrepancyCountOpenByKind(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.q.DiscrepancyCountOpenByKind(ctx)
	if err != nil {
		return nil, translate(err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Kind] = r.N
	}
	return out, nil
}

// SessionCreate stores a console session and forgets the expired ones.
func (s *ConsoleStore) ConsoleSessionCreate(ctx context.Context, idHash []byte, actor string, now, expires time.Time) error {
	if err := s.db.q.ConsoleSessionPurge(ctx, now); err != nil {
		return translate(err)
	}
	return translate(s.db.q.ConsoleSessionCreate(ctx, dbsqlc.ConsoleSessionCreateParams{
		IDHash: idHash, Actor: actor, CreatedAt: now, ExpiresAt: expires}))
}

// SessionGet is the actor of a session that has not expired at now;
// payment.ErrNotFound when there is none.
func (s *ConsoleStore) ConsoleSessionGet(ctx context.Context, idHash []byte, now time.Time) (string, error) {
	row, err := s.db.q.ConsoleSessionGet(ctx, dbsqlc.ConsoleSessionGetParams{IDHash: idHash, Now: now})
	if err != nil {
		return "", translate(err)
	}
	return row.Actor, nil
}

// SessionDelete ends a session.
func (s *ConsoleStore) ConsoleSessionDelete(ctx context.Context, idHash []byte) error {
	return translate(s.db.q.ConsoleSessionDelete(ctx, idHash))
}

// SignInFormUse marks a sign-in form used until it expires and reports
// whether this was its first use. Forms expired a minute before now (a
// margin for the clocks of other instances) are forgotten.
func (s *ConsoleStore) ConsoleSignInFormUse(ctx context.Context, nonceHash []byte, now, expires time.Time) (bool, error) {
	if err := s.db.q.ConsoleSignInFormPurge(ctx, now.Add(-time.Minute)); err != nil {
		return false, translate(err)
	}
	n, err := s.db.q.ConsoleSignInFormUse(ctx, dbsqlc.ConsoleSignInFormUseParams{NonceHash: nonceHash, ExpiresAt: expires})
	if err != nil {
		return false, translate(err)
	}
	return n == 1, nil
}
