package postgres

import (
	"context"
	"time"

	"github.com/acmepay/payments/internal/postgres/dbsqlc"
)

// ConsoleStore holds the reads of the operations console that the payment
// service has no use for.
type ConsoleStore struct{ db *DB }

// NewConsoleStore returns the console's reads on db.
func NewConsoleStore(db *DB) *ConsoleStore { return &ConsoleStore{db: db} }

// WaitingByAge is the count of payments in one waiting status and one age
// bucket (under_5m, 5m_to_1h, 1h_to_24h, over_24h).
type WaitingByAge struct {
	Status string
	Age    string
	N      int64
}

// PaymentCountWaitingByAge counts unknown, processing, requires_action and
// pending payments by how long they have been in their status.
func (s *ConsoleStore) PaymentCountWaitingByAge(ctx context.Context, now time.Time) ([]WaitingByAge, error) {
	rows, err := s.db.q.PaymentCountWaitingByAge(ctx, now)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]WaitingByAge, len(rows))
	for i, r := range rows {
		out[i] = WaitingByAge{Status: r.Status, Age: r.Age, N: r.N}
	}
	return out, nil
}

// PaymentCountByStatus counts payments by status.
func (s *ConsoleStore) PaymentCountByStatus(ctx context.Context) (map[string]int64, error) {
	return NewPaymentStore(s.db).CountByStatus(ctx)
}

// EventSummary is one event of a payment, without its snapshot.
type EventSummary struct {
	ID        string
	Type      string
	CreatedAt time.Time
}

// EventListByPayment lists a payment's events in feed order, at most limit.
func (s *ConsoleStore) EventListByPayment(ctx context.Context, accountID, paymentID string, limit int) ([]EventSummary, error) {
	rows, err := s.db.q.EventListByPayment(ctx, dbsqlc.EventListByPaymentParams{AccountID: accountID, PaymentID: paymentID, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]EventSummary, len(rows))
	for i, r := range rows {
		out[i] = EventSummary{ID: r.ID, Type: r.Type, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// Delivery is one provider webhook delivery about a payment.
type Delivery struct {
	EventID    string
	Type       string
	Outcome    string
	ReceivedAt time.Time
}

// WebhookDeliveryListByPayment lists the provider's webhook deliveries
// about a payment, oldest first, at most limit.
func (s *ConsoleStore) WebhookDeliveryListByPayment(ctx context.Context, accountID, paymentID string, limit int) ([]Delivery, error) {
	rows, err := s.db.q.WebhookDeliveryListByPayment(ctx, dbsqlc.WebhookDeliveryListByPaymentParams{
		AccountID: accountID, PaymentID: &paymentID, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = Delivery{EventID: r.EventID, Type: r.Type, Outcome: r.Outcome, ReceivedAt: r.ReceivedAt}
	}
	return out, nil
}
