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
	// PaymentGetAny reads a payment of any account (operations).
	PaymentGetAny(ctx context.Context, id string) (*Payment, error)
	// AttemptClaim leases one unresolved attempt if nobody holds it.
	AttemptClaim(ctx context.Context, id string, now, leaseUntil time.Time) (*Attempt, error)
	AttemptsUnresolvedByPayment(ctx context.Context, paymentID string) ([]*Attempt, error)
	RefundByAttempt(ctx context.Context, attemptID string) (*Refund, error)
	PaymentByProviderID(ctx context.Context, accountID, providerPaymentID string) (*Payment, error)
	// EventsRead records the cursor an account's consumer passed back.
	EventsRead(ctx context.Context, accountID string, pos FeedPosition) error
	// EventsAfter reads an account's events after a position, in (xid, seq)
	// order, below the horizon of running transactions.
	EventsAfter(ctx context.Context, accountID string, after FeedPosition, limit int) ([]FeedEvent, error)
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
	// KeyReserve inserts the record and returns its id; false when the
	// scope already has one.
	KeyReserve(ctx context.Context, r Reservation) (int64, bool, error)
	// KeyReserveNumbered is KeyReserve that also reads the order's next
	// attempt number of op (NextAttemptNumber) with the reservation, in one
	// round trip; next is 0 when the key was not reserved.
	KeyReserveNumbered(ctx context.Context, r Reservation, orderID string, op Operation) (keyID int64, reserved bool, next int, err error)
	// KeyLock reads and locks the record of a scope.
	KeyLock(ctx context.Context, s idempotency.Scope) (idempotency.Record, error)
	// KeyLockForSettle locks the record of a scope, then the payment, and
	// reads the attempt: what recording a provider's answer reads, in one
	// round trip and in the order every path locks (key, then payment).
	KeyLockForSettle(ctx context.Context, s idempotency.Scope, paymentID, attemptID string) (idempotency.Record, *Payment, *Attempt, error)
	KeyTakeLease(ctx context.Context, id int64, until, now time.Time) error
	KeyMarkUnknown(ctx context.Context, id int64, now time.Time) error
	KeyComplete(ctx context.Context, id int64, ans idempotency.Answer, now time.Time) error
	// KeyDetachAttempt clears the attempt a key was reserved for, when its
	// request completed without starting one.
	KeyDetachAttempt(ctx context.Context, id int64) error
	// KeyLockByAttempt reads and locks the key record that started an
	// attempt, if any.
	KeyLockByAttempt(ctx context.Context, attemptID string) (idempotency.Record, error)

	NextAttemptNumber(ctx context.Context, accountID, orderID string, op Operation) (int, error)
	PaymentInsert(ctx context.Context, p *Payment) error
	// PaymentLock reads and locks a payment: every state change of one
	// payment is serialized by this lock.
	PaymentLock(ctx context.Context, accountID, id string) (*Payment, error)
	PaymentUpdate(ctx context.Context, p *Payment) error
	// PaymentSetDisputes stores the payment's disputes and updated_at.
	PaymentSetDisputes(ctx context.Context, p *Payment) error

	AttemptInsert(ctx context.Context, a *Attempt) error
	AttemptGet(ctx context.Context, id string) (*Attempt, error)
	AttemptSetLease(ctx context.Context, id string, until, now time.Time) error
	AttemptUpdateOutcome(ctx context.Context, a *Attempt) error
	AttemptLatest(ctx context.Context, paymentID string, op Operation) (*Attempt, error)
	// AttemptsUnresolved counts the payment's attempts of these operations
	// whose outcome is not known.
	AttemptsUnresolved(ctx context.Context, paymentID string, ops ...Operation) (int, error)
	// OrderHeldBy names a payment of the order that ended declined or
	// failed and has a cancel still unresolved; ErrNotFound when none.
	OrderHeldBy(ctx context.Context, accountID, orderID string) (string, error)

	RefundInsert(ctx context.Context, r *Refund) error
	RefundByAttempt(ctx context.Context, attemptID string) (*Refund, error)
	RefundSumPending(ctx context.Context, paymentID string) (int64, error)
	// RefundSumSucceeded sums the payment's refunds the provider made.
	RefundSumSucceeded(ctx context.Context, paymentID string) (int64, error)
	RefundUpdate(ctx context.Context, r *Refund) error

	AuditInsert(ctx context.Context, e AuditEntry) error
	EventInsert(ctx context.Context, e Event) error
	// WebhooksEnqueue is the outbox of merchant webhooks: a delivery job per
	// endpoint that takes the event, written in this transaction.
	WebhooksEnqueue(ctx context.Context, e Event) error
}
