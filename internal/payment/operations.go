package payment

import (
	"context"
	"encoding/json"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/provider"
)

// Capture captures an authorized payment, in full when amount is 0.
func (s *Service) Capture(ctx context.Context, acct Account, key, paymentID string, amount int64) (idempotency.Response, error) {
	if amount < 0 || amount > MaxAmount {
		return idempotency.Response{}, fieldError("amount", "must be an integer from 1 to 99999999 (minor units)")
	}
	return s.paymentOp(ctx, acct, key, idempotency.OpPaymentsCapture, OpCapture, paymentID, amount,
		func(p *Payment, n int, key string) (any, error) {
			if amount > p.Amount {
				return nil, fieldError("amount", "must not exceed the authorized amount")
			}
			return provider.CaptureRequest{IdempotencyKey: key, IntentID: p.ProviderPaymentID, Amount: amount}, nil
		})
}

// Cancel cancels an authorized, uncaptured payment.
func (s *Service) Cancel(ctx context.Context, acct Account, key, paymentID string) (idempotency.Response, error) {
	return s.paymentOp(ctx, acct, key, idempotency.OpPaymentsCancel, OpCancel, paymentID, 0,
		func(p *Payment, n int, key string) (any, error) {
			return cancelRequest{CancelRequest: provider.CancelRequest{IdempotencyKey: key, IntentID: p.ProviderPaymentID}, From: p.Status}, nil
		})
}

// paymentOp runs a capture or a cancel. Under the payment's lock it
// refuses a payment that is not authorized, or one with a capture or cancel
// still in flight: of two racing operations exactly one reaches the
// provider.
func (s *Service) paymentOp(ctx context.Context, acct Account, key, idemOp string, op Operation, paymentID string, amount int64,
	build func(p *Payment, n int, key string) (any, error)) (idempotency.Response, error) {
	fp, err := idempotency.Fingerprint(idemOp, struct {
		PaymentID string `json:"payment_id"`
		Amount    int64  `json:"amount"`
	}{paymentID, amount})
	if err != nil {
		return idempotency.Response{}, err
	}
	scope := idempotency.Scope{AccountID: acct.ID, Operation: idemOp, KeyHash: idempotency.HashKey(key)}
	return s.execute(ctx, acct, scope, fp, paymentID, ReadAhead{},
		func(ctx context.Context, tx Tx, now time.Time, paymentID, attemptID string) (*Payment, *Attempt, error) {
			p, err := tx.PaymentLock(ctx, acct.ID, paymentID)
			if err != nil {
				return nil, nil, err
			}
			switch {
			case p.Status == StatusAuthorized:
			case op == OpCancel && p.Status == StatusRequiresAction && p.ProviderPaymentID != "":
				// The customer has not acted yet: canceling at the provider
				// decides the race with a payment made meanwhile.
			case op == OpCancel:
				return nil, nil, Errorf(CodeInvalidState, "the payment is %s; only an authorized payment, or one that requires action, can be canceled", p.Status)
			default:
				return nil, nil, Errorf(CodeInvalidState, "the payment is %s; only an authorized payment can be %s", p.Status, pastTense(op))
			}
			busy, err := tx.AttemptsUnresolved(ctx, p.ID, OpCapture, OpCancel)
			if err != nil {
				return nil, nil, err
			}
			if busy > 0 {
				return nil, nil, Errorf(CodeInvalidState, "another capture or cancel of this payment is in progress")
			}
			n, err := tx.NextAttemptNumber(ctx, acct.ID, p.OrderID, op)
			if err != nil {
				return nil, nil, err
			}
			req, err := build(p, n, ProviderKey(p.OrderID, op, n))
			if err != nil {
				return nil, nil, err
			}
			a, err := s.insertAttempt(ctx, tx, p, attemptID, op, n, req, now)
			if err != nil {
				return nil, nil, err
			}
			return p, a, tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now, Actor: actorOf(ctx),
				Action: string(op) + ".requested", Reason: reasonOf(ctx), Details: map[string]any{"attempt_id": a.ID, "provider_key": a.ProviderKey, "amount": amount}})
		})
}

// Refund refunds part or all of a captured payment. The n-th refund of an
// order is sent with {order}:estornar-v{n}; retries of one refund reuse it.
func (s *Service) Refund(ctx context.Context, acct Account, key, paymentID string, amount int64) (idempotency.Response, error) {
	if amount < 1 || amount > MaxAmount {
		return idempotency.Response{}, fieldError("amount", "must be an integer from 1 to 99999999 (minor units)")
	}
	op := idempotency.OpRefundsCreate
	fp, err := idempotency.Fingerprint(op, struct {
		PaymentID string `json:"payment_id"`
		Amount    int64  `json:"amount"`
	}{paymentID, amount})
	if err != nil {
		return idempotency.Response{}, err
	}
	scope := idempotency.Scope{AccountID: acct.ID, Operation: op, KeyHash: idempotency.HashKey(key)}
	return s.execute(ctx, acct, scope, fp, paymentID, ReadAhead{},
		func(ctx context.Context, tx Tx, now time.Time, paymentID, attemptID string) (*Payment, *Attempt, error) {
			p, err := tx.PaymentLock(ctx, acct.ID, paymentID)
			if err != nil {
				return nil, nil, err
			}
			if p.Status != StatusCaptured {
				return nil, nil, Errorf(CodeInvalidState, "the payment is %s; only a captured payment can be refunded", p.Status)
			}
			// Under the payment's lock: refunds in flight hold their amount.
			pending, err := tx.RefundPending(ctx, p.ID)
			if err != nil {
				return nil, nil, err
			}
			if available := p.AmountCaptured - p.AmountRefunded - pending; amount > available {
				return nil, nil, Errorf(CodeRefundExceedsCaptured, "the refund of %d exceeds the %d still refundable", amount, max(available, 0))
			}
			r, a, err := s.startRefund(ctx, tx, p, attemptID, amount, p.ProviderPaymentID, now)
			if err != nil {
				return nil, nil, err
			}
			return p, a, tx.AuditInsert(ctx, AuditEntry{AccountID: p.AccountID, PaymentID: p.ID, At: now, Actor: "api",
				Action: "estornar.requested", Details: map[string]any{"attempt_id": a.ID, "provider_key": a.ProviderKey, "refund_id": r.ID, "amount": amount}})
		})
}

// startRefund writes a refund of a locked payment and the attempt that
// sends it: the n-th refund of an order goes with {order}:estornar-v{n}.
func (s *Service) startRefund(ctx context.Context, tx Tx, p *Payment, attemptID string, amount int64, intentID string, now time.Time) (*Refund, *Attempt, error) {
	n, err := tx.NextAttemptNumber(ctx, p.AccountID, p.OrderID, OpRefund)
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

func fieldError(field, msg string) *Error {
	return &Error{Code: CodeInvalidRequest, Message: "the request has invalid fields", Fields: []FieldError{{Field: field, Message: msg}}}
}

func pastTense(op Operation) string {
	if op == OpCancel {
		return "canceled"
	}
	return "captured"
}
