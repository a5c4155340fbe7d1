package postgres_test

import (
	"errors"
	"testing"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/payment"
)

// PaymentFailOver writes a failover only while everything it was decided
// on still holds under the locks; otherwise it writes nothing.
func TestPaymentFailOver(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// change makes the failover stale before it is tried.
		change func(t *testing.T, c *conf, f *payment.FailOver, keyID int64)
		want   bool
	}{
		{"Holds", func(*testing.T, *conf, *payment.FailOver, int64) {}, true},
		{"TakenOverByATwin", func(t *testing.T, c *conf, f *payment.FailOver, _ int64) {
			c.tx(t, func(tx payment.Tx) error { return tx.AttemptSetLease(c.ctx, f.Failed.ID, at(90), at(60)) })
		}, false},
		{"AttemptResolved", func(t *testing.T, c *conf, f *payment.FailOver, _ int64) {
			a := *f.Failed
			a.Status, a.UpdatedAt = payment.AttemptSucceeded, at(2)
			c.tx(t, func(tx payment.Tx) error { return tx.AttemptUpdateOutcome(c.ctx, &a) })
		}, false},
		{"KeyCompleted", func(t *testing.T, c *conf, _ *payment.FailOver, keyID int64) {
			c.tx(t, func(tx payment.Tx) error {
				return tx.IdempotencyKeyComplete(c.ctx, keyID, idempotency.Answer{Kind: idempotency.KindCreated, Body: []byte(`{}`)}, at(2))
			})
		}, false},
		{"PaymentMovedOn", func(_ *testing.T, _ *conf, f *payment.FailOver, _ int64) {
			p := *f.Payment
			p.Provider = payment.ProviderMercadoPago
			f.Payment = &p
		}, false},
		{"NumberTaken", func(t *testing.T, c *conf, f *payment.FailOver, _ int64) {
			insertAttempts(t, c, newAttempt(c.p, "att_other", payment.OpAuthorize, 2, at(1)))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newConf(t)
			f, keyID := failOverOf(t, c)
			tc.change(t, c, &f, keyID)
			var got bool
			c.tx(t, func(tx payment.Tx) (err error) { got, err = tx.PaymentFailOver(c.ctx, f); return err })
			if got != tc.want {
				t.Fatalf("PaymentFailOver = %v, want %v", got, tc.want)
			}
			p, err := c.store.PaymentGetByID(c.ctx, "acct_1", c.p.ID)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := c.store.IdempotencyKeyGet(c.ctx, f.Scope)
			if err != nil {
				t.Fatal(err)
			}
			failed := attemptGet(t, c, f.Failed.ID)
			if !tc.want {
				if p.Provider != payment.ProviderStripe || p.Attempt != 1 || rec.AttemptID != f.Failed.ID || failed.Status == payment.AttemptFailed {
					t.Fatalf("a stale failover wrote: payment %s/%d, key on %s, attempt %s", p.Provider, p.Attempt, rec.AttemptID, failed.Status)
				}
				return
			}
			next := attemptGet(t, c, f.Next.ID)
			if p.Provider != payment.ProviderMercadoPago || p.Attempt != 2 || p.Version != 2 || rec.AttemptID != f.Next.ID ||
				!rec.LeaseExpiresAt.Equal(at(40)) || failed.Status != payment.AttemptFailed || failed.FailureCode != payment.FailureProviderUnreachable ||
				failed.LeaseExpiresAt != nil || next.Status != payment.AttemptProcessing || next.Provider != payment.ProviderMercadoPago || next.Number != 2 {
				t.Fatalf("after the failover: payment %s/%d v%d, key on %s, failed %+v, next %+v", p.Provider, p.Attempt, p.Version, rec.AttemptID, failed, next)
			}
		})
	}
}

// failOverOf stores pay_1's first attempt under a key and its lease, and
// returns the failover of it to Mercado Pago.
func failOverOf(t *testing.T, c *conf) (payment.FailOver, int64) {
	t.Helper()
	lease, nextLease := at(30), at(40)
	a := newAttempt(c.p, "att_fo_1", payment.OpAuthorize, 1, at(0))
	a.LeaseExpiresAt = &lease
	sc := idempotency.Scope{AccountID: "acct_1", Operation: "create", KeyHash: []byte("kh-fo")}
	var id int64
	c.tx(t, func(tx payment.Tx) error {
		if err := tx.AttemptInsert(c.ctx, a); err != nil {
			return err
		}
		var err error
		id, _, err = tx.IdempotencyKeyReserve(c.ctx, payment.Reservation{Scope: sc, Fingerprint: []byte("fp"),
			LeaseUntil: lease, PaymentID: c.p.ID, AttemptID: a.ID, Now: at(0)})
		return err
	})
	next := newAttempt(c.p, "att_fo_2", payment.OpAuthorize, 2, at(1))
	next.Provider, next.LeaseExpiresAt = payment.ProviderMercadoPago, &nextLease
	p := *c.p
	p.Provider = payment.ProviderStripe
	return payment.FailOver{Scope: sc, Payment: &p, Failed: a, FailureCode: payment.FailureProviderUnreachable,
		FailureMessage: "unreachable", Next: next, Now: at(1),
		Audit: payment.AuditEntry{Actor: "api", Details: map[string]any{"to": "mercadopago"}}}, id
}

// A payment and its first attempt in one statement keep the live-order
// guarantee: a second live payment of the order is refused, before its
// attempt's number is checked, and neither row is written.
func TestPaymentInsertWithAttemptLiveOrder(t *testing.T) {
	t.Parallel()
	c := newConf(t)
	insertAttempts(t, c, newAttempt(c.p, "att_live_1", payment.OpAuthorize, 1, at(0)))
	p := newPayment("pay_2", c.p.OrderID, 2, payment.StatusProcessing)
	a := newAttempt(p, "att_live_2", payment.OpAuthorize, 1, at(0))
	err := c.store.WithTx(c.ctx, func(tx payment.Tx) error { return tx.PaymentInsertWithAttempt(c.ctx, p, a) })
	if !errors.Is(err, payment.ErrLiveOrderConflict) {
		t.Fatalf("PaymentInsertWithAttempt of a second live payment: %v, want ErrLiveOrderConflict", err)
	}
	if _, err := c.store.PaymentGetByID(c.ctx, "acct_1", "pay_2"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("the refused payment reads %v, want not found", err)
	}
}
