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
	// IdempotencyKeyGet reads a key record without locking it.
	IdempotencyKeyGet(ctx context.Context, s idempotency.Scope) (idempotency.Record, error)
	PaymentGetByID(ctx context.Context, accountID, id string) (*Payment, error)
	PaymentListByOrder(ctx context.Context, accountID, orderID string, limit int) ([]*Payment, error)
	PaymentGetLiveByOrder(ctx context.Context, accountID, orderID string) (*Payment, error)
	// PaymentGetAnyAccount reads a payment of any account (operations).
	PaymentGetAnyAccount(ctx context.Context, id string) (*Payment, error)
	// AttemptClaimByID leases one unresolved attempt if nobody holds it.
	AttemptClaimByID(ctx context.Context, id string, now, leaseUntil time.Time) (*Attempt, error)
	AttemptListUnresolvedByPayment(ctx context.Context, paymentID string) ([]*Attempt, error)
	RefundGetByAttempt(ctx context.Context, attemptID string) (*Refund, error)
	// RefundListByPayment reads a payment's refunds, oldest first.
	RefundListByPayment(ctx context.Context, paymentID string) ([]*Refund, error)
	// RefundGetByID reads one refund of the account.
	RefundGetByID(ctx context.Context, accountID, id string) (*Refund, error)
	// RefundListByPaymentAfter reads a page of the account's refunds of a
	// payment, oldest first, after the refund after (nil: from the first).
	RefundListByPaymentAfter(ctx context.Context, accountID, paymentID string, after *Refund, limit int) ([]*Refund, error)
	PaymentGetByProviderID(ctx context.Context, accountID, providerPaymentID string) (*Payment, error)
	// AccountFeedCursorAdvance records the cursor an account's consumer
	// passed back, and when.
	AccountFeedCursorAdvance(ctx context.Context, accountID string, pos FeedPosition, at time.Time) error
	// EventListAfter reads an account's events after a position, in (xid, seq)
	// order, below the horizon of running transactions.
	EventListAfter(ctx context.Context, accountID string, after FeedPosition, limit int) ([]FeedEvent, error)
}

// Reservation is a new key record, written in progress with a lease.
type Reservation struct {
	Scope       idempotency.Scope
	Fingerprint []byte
	// BodyHash: see Key.BodyHash; nil stores NULL.
	BodyHash   []byte
	LeaseUntil time.Time
	PaymentID  string
	AttemptID  string
	Now        time.Time
}

// FailOver is a failover written in one statement (Tx.PaymentFailOver).
type FailOver struct {
	Scope idempotency.Scope
	// Payment is the payment at the provider that failed, as the request
	// knows it.
	Payment *Payment
	// Failed is the attempt as the request sent it, under its lease; it
	// fails with FailureCode and FailureMessage.
	Failed                      *Attempt
	FailureCode, FailureMessage string
	// Next is the attempt at the next provider (Next.Provider), number
	// Payment.Attempt+1.
	Next  *Attempt
	Audit AuditEntry
	Now   time.Time
}

// Tx is one database transaction. Row locks taken through it are held until
// the transaction ends.
type Tx interface {
	// IdempotencyKeyReserve inserts the record and returns its id; false when the
	// scope already has one.
	IdempotencyKeyReserve(ctx context.Context, r Reservation) (int64, bool, error)
	// IdempotencyKeyReserveNumbered is IdempotencyKeyReserve that also reads the order's next
	// attempt number of op (AttemptNextNumber) with the reservation, in one
	// round trip; next is 0 when the key was not reserved.
	IdempotencyKeyReserveNumbered(ctx context.Context, r Reservation, orderID string, op Operation) (keyID int64, reserved bool, next int, err error)
	// IdempotencyKeyGetForUpdate reads and locks the record of a scope.
	IdempotencyKeyGetForUpdate(ctx context.Context, s idempotency.Scope) (idempotency.Record, error)
	// IdempotencyKeyGetForUpdateWithPayment locks the record of a scope, then the payment, and
	// reads the attempt: what recording a provider's answer reads, in one
	// round trip and in the order every path locks (key, then payment).
	IdempotencyKeyGetForUpdateWithPayment(ctx context.Context, s idempotency.Scope, paymentID, attemptID string) (idempotency.Record, *Payment, *Attempt, error)
	IdempotencyKeyTakeLease(ctx context.Context, id int64, until, now time.Time) error
	IdempotencyKeyMarkUnknown(ctx context.Context, id int64, now time.Time) error
	IdempotencyKeyComplete(ctx context.Context, id int64, ans idempotency.Answer, now time.Time) error
	// IdempotencyKeyDetachAttempt clears the attempt a key was reserved for, when its
	// request completed without starting one.
	IdempotencyKeyDetachAttempt(ctx context.Context, id int64) error
	// IdempotencyKeyMoveAttempt points a key at the attempt a failover
	// started, under a new lease.
	IdempotencyKeyMoveAttempt(ctx context.Context, id int64, attemptID string, leaseUntil, now time.Time) error
	// IdempotencyKeyGetByAttemptForUpdate reads and locks the key record that started an
	// attempt, if any.
	IdempotencyKeyGetByAttemptForUpdate(ctx context.Context, attemptID string) (idempotency.Record, error)

	AttemptNextNumber(ctx context.Context, accountID, orderID string, op Operation) (int, error)
	PaymentInsert(ctx context.Context, p *Payment) error
	// PaymentInsertWithAttempt is PaymentInsert and AttemptInsert of its
	// first attempt, in one statement.
	PaymentInsertWithAttempt(ctx context.Context, p *Payment, a *Attempt) error
	// PaymentGetByIDForUpdate reads and locks a payment: every state change of one
	// payment is serialized by this lock.
	PaymentGetByIDForUpdate(ctx context.Context, accountID, id string) (*Payment, error)
	PaymentUpdateState(ctx context.Context, p *Payment) error
	// PaymentMoveProvider records a failover: the payment's provider and
	// attempt number.
	PaymentMoveProvider(ctx context.Context, p *Payment, now time.Time) error
	// PaymentFailOver locks the key, then the payment, and writes the
	// failover in one statement if it still holds: the key is not
	// completed, the payment is at f.Payment's provider, the failed
	// attempt is unresolved under its lease and the next number is free.
	// false: nothing was written.
	PaymentFailOver(ctx context.Context, f FailOver) (bool, error)
	// PaymentSetDisputes stores the payment's disputes and updated_at.
	PaymentSetDisputes(ctx context.Context, p *Payment) error

	AttemptInsert(ctx context.Context, a *Attempt) error
	AttemptGetByID(ctx context.Context, id string) (*Attempt, error)
	AttemptSetLease(ctx context.Context, id string, until, now time.Time) error
	AttemptUpdateOutcome(ctx context.Context, a *Attempt) error
	// AttemptUpdateOutcomeWithPayment is AttemptUpdateOutcome then
	// PaymentUpdateState, in one statement when the payment is locked in
	// this transaction.
	AttemptUpdateOutcomeWithPayment(ctx context.Context, a *Attempt, p *Payment) error
	AttemptLatestByPayment(ctx context.Context, paymentID string, op Operation) (*Attempt, error)
	// AttemptCountUnresolvedByPaymentOps counts the payment's attempts of these operations
	// whose outcome is not known.
	AttemptCountUnresolvedByPaymentOps(ctx context.Context, paymentID string, ops ...Operation) (int, error)
	// AttemptCancelHoldingOrder names a payment of the order that ended declined or
	// failed and has a cancel still unresolved; ErrNotFound when none.
	AttemptCancelHoldingOrder(ctx context.Context, accountID, orderID string) (string, error)

	RefundInsert(ctx context.Context, r *Refund) error
	RefundGetByAttempt(ctx context.Context, attemptID string) (*Refund, error)
	RefundSumPending(ctx context.Context, paymentID string) (int64, error)
	// RefundSumSucceeded sums the payment's refunds the provider made.
	RefundSumSucceeded(ctx context.Context, paymentID string) (int64, error)
	RefundUpdateOutcome(ctx context.Context, r *Refund) error

	AuditInsert(ctx context.Context, e AuditEntry) error
	EventInsert(ctx context.Context, e Event) error
	// AuditEventInsert is AuditInsert then EventInsert, in one statement.
	AuditEventInsert(ctx context.Context, a AuditEntry, e Event) error
	// WebhooksEnqueue is the outbox of merchant webhooks: a delivery job per
	// endpoint that takes the event, written in this transaction.
	WebhooksEnqueue(ctx context.Context, e Event) error
}
