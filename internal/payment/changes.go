package payment

import (
	"context"
	"encoding/json"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/provider"
)

// Capture captures an authorized payment, in full when amount is 0.
func (s *Service) Capture(ctx context.Context, acct Account, key, paymentID string, amount int64) (idempotency.Answer, error) {
	if amount < 0 || amount > MaxAmount {
		return idempotency.Answer{}, fieldError("amount", "must be an integer from 1 to 99999999 (minor units)")
	}
	return s.changePayment(ctx, acct, key, idempotency.OpPaymentsCapture, paymentID, &changing{answerPayment: answerPayment{s},
		acct: acct, op: OpCapture, amount: amount,
		build: func(p *Payment, key string) (any, error) {
			if amount > p.Amount {
				return nil, fieldError("amount", "must not exceed the authorized amount")
			}
			return provider.CaptureRequest{IdempotencyKey: key, IntentID: p.ProviderPaymentID, Amount: amount}, nil
		}})
}

// Cancel cancels an authorized, uncaptured payment.
func (s *Service) Cancel(ctx context.Context, acct Account, key, paymentID string) (idempotency.Answer, error) {
	return s.changePayment(ctx, acct, key, idempotency.OpPaymentsCancel, paymentID, &changing{answerPayment: answerPayment{s},
		acct: acct, op: OpCancel,
		build: func(p *Payment, key string) (any, error) {
			return cancelRequest{CancelRequest: provider.CancelRequest{IdempotencyKey: key, IntentID: p.ProviderPaymentID}, From: p.Status}, nil
		}})
}

// Refund refunds part or all of a captured payment. The n-th refund of an
// order is sent with {order}:estornar-v{n}; retries of one refund reuse it.
func (s *Service) Refund(ctx context.Context, acct Account, key, paymentID string, amount int64) (idempotency.Answer, error) {
	if amount < 1 || amount > MaxAmount {
		return idempotency.Answer{}, fieldError("amount", "must be an integer from 1 to 99999999 (minor units)")
	}
	return s.changePayment(ctx, acct, key, idempotency.OpRefundsCreate, paymentID, &refunding{answerPayment{s}, acct, amount})
}

// changePayment runs a capture, cancel or refund of one payment under the
// client key; the request it binds the key to is the payment and amount.
func (s *Service) changePayment(ctx context.Context, acct Account, key, op, paymentID string, m interface {
	Mutation
	amountOf() int64
}) (idempotency.Answer, error) {
	k, err := NewKey(acct.ID, op, key, paymentID, struct {
		PaymentID string `json:"payment_id"`
		Amount    int64  `json:"amount"`
	}{paymentID, m.amountOf()})
	if err != nil {
		return idempotency.Answer{}, err
	}
	return s.Execute(ctx, acct, k, m)
}

// changing is a capture or a cancel on the money path.
type changing struct {
	answerPayment
	acct   Account
	op     Operation
	amount int64
	// build makes the provider request of attempt key.
	build func(p *Payment, key string) (any, error)
}

func (c *changing) amountOf() int64 { return c.amount }

// Start refuses a payment that is not authorized, or one with a capture
// or cancel still in flight, under the payment's lock: of two racing
// operations exactly one reaches the provider.
func (c *changing) Start(ctx context.Context, tx Tx, at Reserved) (Started, error) {
	p, err := tx.PaymentGetByIDForUpdate(ctx, c.acct.ID, at.PaymentID)
	if err != nil {
		return Started{}, err
	}
	switch {
	case p.Status == StatusAuthorized:
	case c.op == OpCancel && p.Status == StatusRequiresAction && p.ProviderPaymentID != "":
		// The customer has not acted yet: canceling at the provider
		// decides the race with a payment made meanwhile.
	case c.op == OpCancel:
		return Started{}, Errorf(CodeInvalidState, "the payment is %s; only an authorized payment, or one that requires action, can be canceled", p.Status)
	default:
		return Started{}, Errorf(CodeInvalidState, "the payment is %s; only an authorized payment can be %s", p.Status, pastTense(c.op))
	}
	busy, err := tx.AttemptCountUnresolvedByPaymentOps(ctx, p.ID, OpCapture, OpCancel)
	if err != nil {
		return Started{}, err
	}
	if busy > 0 {
		return Started{}, Errorf(CodeInvalidState, "another capture or cancel of this payment is in progress")
	}
	n, err := tx.AttemptNextNumber(ctx, c.acct.ID, p.OrderID, c.op)
	if err != nil {
		return Started{}, err
	}
	req, err := c.build(p, ProviderKey(p.OrderID, c.op, n))
	if err != nil {
		return Started{}, err
	}
	a, err := c.s.insertAttempt(ctx, tx, p, at.AttemptID, c.op, n, req, at.Now)
	if err != nil {
		return Started{}, err
	}
	return Send(p, a), tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: at.Now, Actor: actorOf(ctx),
		Action: string(c.op) + ".requested", Reason: reasonOf(ctx), Details: map[string]any{"attempt_id": a.ID, "provider_key": a.ProviderKey, "amount": c.amount}})
}

// refunding is a refund on the money path.
type refunding struct {
	answerPayment
	acct   Account
	amount int64
}

func (r *refunding) amountOf() int64 { return r.amount }

// Start refuses a refund of more than is still refundable, counting the
// refunds in flight, under the payment's lock.
func (r *refunding) Start(ctx context.Context, tx Tx, at Reserved) (Started, error) {
	p, err := tx.PaymentGetByIDForUpdate(ctx, r.acct.ID, at.PaymentID)
	if err != nil {
		return Started{}, err
	}
	if p.Status != StatusCaptured {
		return Started{}, Errorf(CodeInvalidState, "the payment is %s; only a captured payment can be refunded", p.Status)
	}
	// Under the payment's lock: refunds in flight hold their amount.
	pending, err := tx.RefundSumPending(ctx, p.ID)
	if err != nil {
		return Started{}, err
	}
	if available := p.AmountCaptured - p.AmountRefunded - pending; r.amount > available {
		return Started{}, Errorf(CodeRefundExceedsCaptured, "the refund of %d exceeds the %d still refundable", r.amount, max(available, 0))
	}
	rf, a, err := r.s.StartRefund(ctx, tx, p, at.AttemptID, r.amount, p.ProviderPaymentID, at.Now)
	if err != nil {
		return Started{}, err
	}
	return Send(p, a), tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: at.Now, Actor: actorOf(ctx),
		Action: "estornar.requested", Reason: reasonOf(ctx), Details: map[string]any{"attempt_id": a.ID, "provider_key": a.ProviderKey, "refund_id": rf.ID, "amount": r.amount}})
}

// StartRefund writes a refund of a locked payment and the attempt that
// sends it: the n-th refund of an order goes with {order}:estornar-v{n}.
func (s *Service) StartRefund(ctx context.Context, tx Tx, p *Payment, attemptID string, amount int64, intentID string, now time.Time) (*Refund, *Attempt, error) {
	n, err := tx.AttemptNextNumber(ctx, p.AccountID, p.OrderID, OpRefund)
	if err != nil {
		return nil, nil, err
	}
	refundID := s.newID("re")
	req := provider.RefundRequest{IdempotencyKey: ProviderKey(p.OrderID, OpRefund, n), IntentID: intentID,
		Amount: amount, Metadata: map[string]string{"payment_id": p.ID, "order_id": p.OrderID, "refund_id": refundID}}
	a, err := s.insertAttempt(ctx, tx, p, attemptID, OpRefund, n, req, now)
	if err != nil {
		return nil, nil, err
	}
	r := &Refund{ID: refundID, AccountID: p.AccountID, PaymentID: p.ID, AttemptID: a.ID, Amount: amount,
		Status: RefundProcessing, CreatedAt: now, UpdatedAt: now}
	return r, a, tx.RefundInsert(ctx, r)
}

func (s *Service) insertAttempt(ctx context.Context, tx Tx, p *Payment, id string, op Operation, n int, req any, now time.Time) (*Attempt, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	a := s.newAttempt(p, id, op, n, b, now)
	return a, tx.AttemptInsert(ctx, a)
}

// InvalidField is the invalid_request error naming one field.
func InvalidField(field, msg string) *Error { return fieldError(field, msg) }

func fieldError(field, msg string) *Error {
	return &Error{Code: CodeInvalidRequest, Message: "the request has invalid fields", Fields: []FieldError{{Field: field, Message: msg}}}
}

func pastTense(op Operation) string {
	if op == OpCancel {
		return "canceled"
	}
	return "captured"
}
