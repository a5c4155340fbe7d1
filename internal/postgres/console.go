package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acmepay/payments/internal/console"
	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres/internal/dbsqlc"
	"github.com/jackc/pgx/v5/pgconn"
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

// ConsoleOperatorCreate stores a named operator with the SHA-256 of its
// token; a name already taken (in any case) is console.ErrOperatorNameTaken.
func (s *ConsoleStore) ConsoleOperatorCreate(ctx context.Context, op console.Operator, tokenHash []byte) error {
	err := s.db.q.ConsoleOperatorCreate(ctx, dbsqlc.ConsoleOperatorCreateParams{
		ID: op.ID, Name: op.Name, TokenHash: tokenHash, Now: op.CreatedAt})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "console_operators_name" {
		return console.ErrOperatorNameTaken
	}
	return translate(err)
}

// ConsoleOperatorByTokenHash is the name of the enabled operator whose
// token has this hash; payment.ErrNotFound when none has.
func (s *ConsoleStore) ConsoleOperatorByTokenHash(ctx context.Context, tokenHash []byte) (string, error) {
	name, err := s.db.q.ConsoleOperatorByTokenHash(ctx, tokenHash)
	return name, translate(err)
}

// ConsoleOperatorNameTaken reports whether an operator (enabled or not)
// has this name, in any case.
func (s *ConsoleStore) ConsoleOperatorNameTaken(ctx context.Context, name string) (bool, error) {
	taken, err := s.db.q.ConsoleOperatorNameTaken(ctx, name)
	return taken, translate(err)
}

// ConsoleOperatorList lists the operators by name, disabled ones too.
func (s *ConsoleStore) ConsoleOperatorList(ctx context.Context) ([]console.Operator, error) {
	rows, err := s.db.q.ConsoleOperatorList(ctx)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]console.Operator, len(rows))
	for i, r := range rows {
		out[i] = console.Operator{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt, DisabledAt: r.DisabledAt}
	}
	return out, nil
}

// ConsoleOperatorDisable disables the operator of that name and ends its
// sessions; false when there is no enabled operator of that name.
func (s *ConsoleStore) ConsoleOperatorDisable(ctx context.Context, name string, now time.Time) (bool, error) {
	n, err := s.db.q.ConsoleOperatorDisable(ctx, dbsqlc.ConsoleOperatorDisableParams{Name: name, Now: &now})
	return n == 1, translate(err)
}

// ConsolePaymentSearch finds payments of any account by order id or
// provider id, newest first, and those whose audit trail names q as a
// request id among the newest requestIDRowsBack audit rows; at most limit
// of each.
func (s *ConsoleStore) ConsolePaymentSearch(ctx context.Context, q string, limit int) ([]console.SearchHit, error) {
	rows, err := s.db.q.ConsolePaymentSearch(ctx, dbsqlc.ConsolePaymentSearchParams{Q: q, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]console.SearchHit, 0, len(rows))
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.ID] = true
		out = append(out, console.SearchHit{ID: r.ID, AccountID: r.AccountID, OrderID: r.OrderID, Status: payment.Status(r.Status),
			Amount: r.Amount, Currency: r.Currency, Provider: r.Provider, CreatedAt: r.CreatedAt})
	}
	ids, err := s.db.q.ConsolePaymentIDsByRequestID(ctx, dbsqlc.ConsolePaymentIDsByRequestIDParams{Q: q, RowsBack: requestIDRowsBack})
	if err != nil {
		return nil, translate(err)
	}
	for _, id := range ids {
		if seen[id] || len(out) >= 2*limit {
			continue
		}
		p, err := s.db.q.PaymentGetAnyAccount(ctx, id)
		if err != nil {
			return nil, translate(err)
		}
		out = append(out, console.SearchHit{ID: p.ID, AccountID: p.AccountID, OrderID: p.OrderID, Status: payment.Status(p.Status),
			Amount: p.Amount, Currency: p.Currency, Provider: p.Provider, CreatedAt: p.CreatedAt, ByRequestID: true})
	}
	return out, nil
}

// requestIDRowsBack is how far back in the audit trail a request id is
// looked for: at two rows a create, about the last 500,000 payments.
const requestIDRowsBack = 1_000_000

// ConsoleActivityByHour counts, by provider and hour since since, the
// payments created and the authorization attempts with their outcomes.
func (s *ConsoleStore) ConsoleActivityByHour(ctx context.Context, since time.Time) (console.Activity, error) {
	pays, err := s.db.q.ConsolePaymentsByHour(ctx, dbsqlc.ConsolePaymentsByHourParams{FromID: uuidV7Floor("pay_", since), Since: since})
	if err != nil {
		return console.Activity{}, translate(err)
	}
	atts, err := s.db.q.ConsoleAuthorizeOutcomesByHour(ctx, dbsqlc.ConsoleAuthorizeOutcomesByHourParams{
		FromID: uuidV7Floor("att_", since), Since: since})
	if err != nil {
		return console.Activity{}, translate(err)
	}
	var a console.Activity
	for _, r := range pays {
		a.Payments = append(a.Payments, console.HourCount{Provider: r.Provider, Hour: r.Hour, Total: r.N})
	}
	for _, r := range atts {
		a.Authorizations = append(a.Authorizations, console.HourCount{Provider: r.Provider, Hour: r.Hour, Total: r.Total,
			Succeeded: r.Succeeded, Declined: r.Declined, Unknown: r.Unknown})
	}
	return a, nil
}

// uuidV7Floor is the smallest id with this prefix (then 32 hex digits of a
// UUIDv7 without dashes) made at or after t: its first 48 bits are t's
// Unix milliseconds.
func uuidV7Floor(prefix string, t time.Time) string {
	return fmt.Sprintf("%s%012x%020d", prefix, t.UnixMilli(), 0)
}
