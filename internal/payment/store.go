package payment

import (
	"context"
	"errors"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
)

// ErrLiveOrderConflict is returned by Tx.PaymentInsert when the order already
// has a live payment; the transaction is then unusable.
var ErrLiveOrderConflict = errors.New("order has a live payment")

// ErrAttemptNumberTaken is returned when a concurrent transaction allocated
// the same attempt number; the whole transaction should be retried.
var ErrAttemptNumberTaken = errors.New("attempt number taken")

// Store is the persistence the service needs. Each method owns its
// transaction; WithTx composes Tx methods into one.
type Store interface {
	WithTx(ctx context.Context, fn func(Tx) error) error
	// KeyGet reads a key record without locking it.
	KeyGet(ctx context.Context, s idempotency.Scope) (idempotency.Record, error)
	PaymentGet(ctx context.Context, accountID, id string) (*Payment, error)
	PaymentListByOrder(ctx context.Context, accountID, orderID string, limit int) ([]*Payment, error)
	PaymentLiveByOrder(ctx context.Context, accountID, orderID string) (*Payment, error)
}

// Reservation is a new key record, written in progress with a lease.
type Reservation struct {
	Scope       idempotency.Scope
	Fingerprint []byte
	LeaseUntil  time.Time
	PaymentID   string
	AttemptID   string
	Now         time.Time
}

// Tx is one database transaction. Row locks taken through it are held until
// the transaction ends.
type Tx interface {
	// KeyReserve inserts the record; false when the scope already has one.
	KeyReserve(ctx context.Context, r Reservation) (bool, error)
	// KeyLock reads and locks the record of a scope.
	KeyLock(ctx context.Context, s idempotency.Scope) (idempotency.Record, error)
	KeyTakeLease(ctx context.Context, id int64, until, now time.Time) error
	KeyMarkUnknown(ctx context.Context, id int64, now time.Time) error
	KeyComplete(ctx context.Context, id int64, status int, body []byte, now time.Time) error

	NextAttemptNumber(ctx context.Context, accountID, orderID string, op Operation) (int, error)
	PaymentInsert(ctx context.Context, p *Payment) error
	// PaymentLock reads and locks a payment: every state change of one
	// payment is serialized by this lock.
	PaymentLock(ctx context.Context, accountID, id string) (*Payment, error)
	PaymentUpdate(ctx context.Context, p *Payment) error

	AttemptInsert(ctx context.Context, a *Attempt) error
	AttemptGet(ctx context.Context, id string) (*Attempt, error)
	AttemptSetLease(ctx context.Context, id string, until, now time.Time) error
	AttemptUpdateOutcome(ctx context.Context, a *Attempt) error

	AuditInsert(ctx context.Context, e AuditEntry) error
	EventInsert(ctx context.Context, e Event) error
}
