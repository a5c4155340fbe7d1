package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/notify"
	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/reconcile"
	"github.com/jackc/pgx/v5"
)

// The store conformance suite, in the manner of River's driver suite
// (riverdrivertest): every method of payment.Store and payment.Tx, each
// against a fresh database, writing and reading back exact values and the
// edge behaviours the interfaces document. Subtests are named after the
// method they exercise.

// conf is one conformance subtest's store and the seeded payment: acct_1,
// pay_1 of order pedido-842, processing, attempt 1.
type conf struct {
	ctx   context.Context
	store *postgres.PaymentStore
	b     *bundle
	p     *payment.Payment
}

func newConf(t *testing.T) *conf {
	t.Helper()
	store, b := setup(t, nil)
	// As a read gives the seeded payment back.
	p := *b.payment
	p.Version, p.Metadata = 1, map[string]string{}
	return &conf{ctx: context.Background(), store: store, b: b, p: &p}
}

// tx runs fn in one transaction and fails the test on an error.
func (c *conf) tx(t *testing.T, fn func(tx payment.Tx) error) {
	t.Helper()
	if err := c.store.WithTx(c.ctx, fn); err != nil {
		t.Fatal(err)
	}
}

// at is a fixed instant plus s seconds, at the database's precision.
func at(s int) time.Time {
	return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(s) * time.Second)
}

func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("%s: err = %v, want ErrNotFound", what, err)
	}
}

func utc(p *time.Time) *time.Time {
	if p == nil {
		return nil
	}
	u := p.UTC()
	return &u
}

// Times read back carry the process's zone: compare them in UTC.
func utcPayment(p *payment.Payment) *payment.Payment {
	q := *p
	q.CreatedAt, q.UpdatedAt, q.ActionExpiresAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC(), utc(p.ActionExpiresAt)
	q.Disputes = append([]payment.Dispute{}, p.Disputes...)
	for i := range q.Disputes {
		q.Disputes[i].EvidenceDueBy = utc(q.Disputes[i].EvidenceDueBy)
	}
	return &q
}

func utcAttempt(a *payment.Attempt) *payment.Attempt {
	b := *a
	b.CreatedAt, b.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	b.LeaseExpiresAt, b.NextReconcileAt = utc(a.LeaseExpiresAt), utc(a.NextReconcileAt)
	return &b
}

func utcAttempts(as []*payment.Attempt) []*payment.Attempt {
	out := make([]*payment.Attempt, len(as))
	for i, a := range as {
		out[i] = utcAttempt(a)
	}
	return out
}

func utcRefund(r *payment.Refund) *payment.Refund {
	s := *r
	s.CreatedAt, s.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return &s
}

func utcRecord(r idempotency.Record) idempotency.Record {
	r.CreatedAt, r.LeaseExpiresAt, r.CompletedAt = r.CreatedAt.UTC(), utc(r.LeaseExpiresAt), utc(r.CompletedAt)
	return r
}

// newPayment is a payment of acct_1 with every field PaymentInsert stores.
func newPayment(id, orderID string, attempt int, st payment.Status) *payment.Payment {
	return &payment.Payment{
		ID: id, AccountID: "acct_1", OrderID: orderID, Attempt: attempt, Amount: 4590, Currency: "BRL",
		CaptureMethod: "automatic", PaymentMethod: "pm_card_visa", CustomerID: "cus_7", Description: "Pedido 900",
		Metadata: map[string]string{"loja": "centro"}, Status: st,
		Options:   payment.MethodOptions{ReturnURL: "https://loja.example/volta", ExpiresIn: 3600},
		CreatedAt: at(0), UpdatedAt: at(0),
	}
}

// stored is p as a read gives it back right after PaymentInsert.
func stored(p *payment.Payment) *payment.Payment {
	q := *p
	q.Version, q.Disputes = 1, []payment.Dispute{}
	return &q
}

// newAttempt is an attempt of p with every field AttemptInsert stores.
func newAttempt(p *payment.Payment, id string, op payment.Operation, n int, created time.Time) *payment.Attempt {
	return &payment.Attempt{
		ID: id, AccountID: p.AccountID, PaymentID: p.ID, OrderID: p.OrderID, Operation: op, Number: n,
		ProviderKey: p.ID + "-" + string(op) + "-" + fmt.Sprint(n), Status: payment.AttemptProcessing,
		Request: json.RawMessage(`{"amount": 2000}`), CreatedAt: created, UpdatedAt: created,
	}
}

func TestStoreConformance(t *testing.T) {
	t.Parallel()
	t.Run("Keys", conformKeys)
	t.Run("KeyStates", conformKeyStates)
	t.Run("Payments", conformPayments)
	t.Run("PaymentWrites", conformPaymentWrites)
	t.Run("PaymentLists", conformPaymentLists)
	t.Run("Attempts", conformAttempts)
	t.Run("AttemptReads", conformAttemptReads)
	t.Run("AttemptClaims", conformAttemptClaims)
	t.Run("Refunds", conformRefunds)
	t.Run("Audit", conformAudit)
	t.Run("Events", conformEvents)
	t.Run("Webhooks", conformWebhooks)
	t.Run("Transactions", conformTransactions)
}

// reserve stores a key of acct_1 for pay_1 and its attempt att_k.
func reserve(t *testing.T, c *conf) (idempotency.Record, int64) {
	t.Helper()
	a := newAttempt(c.p, "att_k", payment.OpAuthorize, 1, at(0))
	r := payment.Reservation{Scope: idempotency.Scope{AccountID: "acct_1", Operation: "create", KeyHash: []byte("kh-1")},
		Fingerprint: []byte("fp-1"), LeaseUntil: at(30), PaymentID: c.p.ID, AttemptID: a.ID, Now: at(0)}
	var id int64
	c.tx(t, func(tx payment.Tx) error {
		if err := tx.AttemptInsert(c.ctx, a); err != nil {
			return err
		}
		var ok bool
		var err error
		if id, ok, err = tx.IdempotencyKeyReserve(c.ctx, r); err == nil && (!ok || id == 0) {
			err = fmt.Errorf("IdempotencyKeyReserve = %d, %v, want a new id", id, ok)
		}
		return err
	})
	lease := at(30)
	return idempotency.Record{ID: id, Scope: r.Scope, Fingerprint: r.Fingerprint, State: idempotency.StateInProgress,
		LeaseExpiresAt: &lease, PaymentID: c.p.ID, AttemptID: a.ID, CreatedAt: at(0)}, id
}

func conformKeys(t *testing.T) {
	t.Parallel()
	t.Run("IdempotencyKeyReserve", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		want, _ := reserve(t, c)
		got, err := c.store.IdempotencyKeyGet(c.ctx, want.Scope)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "record", utcRecord(got), want)
		// A second reserve of the same scope stores nothing.
		c.tx(t, func(tx payment.Tx) error {
			id, ok, err := tx.IdempotencyKeyReserve(c.ctx, payment.Reservation{Scope: want.Scope, Fingerprint: []byte("other"), Now: at(5)})
			if err == nil && (ok || id != 0) {
				err = fmt.Errorf("second IdempotencyKeyReserve = %d, %v, want 0, false", id, ok)
			}
			return err
		})
		got, _ = c.store.IdempotencyKeyGet(c.ctx, want.Scope)
		same(t, "record after a second reserve", utcRecord(got), want)
	})
	t.Run("IdempotencyKeyGet", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		_, err := c.store.IdempotencyKeyGet(c.ctx, idempotency.Scope{AccountID: "acct_1", Operation: "create", KeyHash: []byte("none")})
		wantNotFound(t, "IdempotencyKeyGet of a missing key", err)
	})
	t.Run("IdempotencyKeyGetForUpdate", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		want, _ := reserve(t, c)
		c.tx(t, func(tx payment.Tx) error {
			got, err := tx.IdempotencyKeyGetForUpdate(c.ctx, want.Scope)
			if err != nil {
				return err
			}
			same(t, "locked record", utcRecord(got), want)
			_, err = tx.IdempotencyKeyGetForUpdate(c.ctx, idempotency.Scope{AccountID: "acct_1", Operation: "create", KeyHash: []byte("none")})
			wantNotFound(t, "IdempotencyKeyGetForUpdate of a missing key", err)
			return nil
		})
	})
	t.Run("IdempotencyKeyGetByAttemptForUpdate", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		want, _ := reserve(t, c)
		c.tx(t, func(tx payment.Tx) error {
			got, err := tx.IdempotencyKeyGetByAttemptForUpdate(c.ctx, "att_k")
			if err != nil {
				return err
			}
			same(t, "record by attempt", utcRecord(got), want)
			_, err = tx.IdempotencyKeyGetByAttemptForUpdate(c.ctx, "att_none")
			wantNotFound(t, "KeyLockByAttempt of an attempt without key", err)
			return nil
		})
	})
}

func conformKeyStates(t *testing.T) {
	t.Parallel()
	// step runs fn on a fresh reserved key and compares the record after.
	step := func(name string, fn func(c *conf, tx payment.Tx, id int64) error, edit func(r *idempotency.Record)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newConf(t)
			want, id := reserve(t, c)
			c.tx(t, func(tx payment.Tx) error { return fn(c, tx, id) })
			got, err := c.store.IdempotencyKeyGet(c.ctx, want.Scope)
			if err != nil {
				t.Fatal(err)
			}
			edit(&want)
			same(t, "record", utcRecord(got), want)
		})
	}
	step("KeyTakeLease", func(c *conf, tx payment.Tx, id int64) error {
		if err := tx.IdempotencyKeyMarkUnknown(c.ctx, id, at(1)); err != nil {
			return err
		}
		return tx.IdempotencyKeyTakeLease(c.ctx, id, at(90), at(2))
	}, func(r *idempotency.Record) { lease := at(90); r.LeaseExpiresAt = &lease })
	step("KeyMarkUnknown", func(c *conf, tx payment.Tx, id int64) error {
		return tx.IdempotencyKeyMarkUnknown(c.ctx, id, at(1))
	}, func(r *idempotency.Record) { r.State, r.LeaseExpiresAt = idempotency.StateUnknown, nil })
	step("IdempotencyKeyComplete", func(c *conf, tx payment.Tx, id int64) error {
		ans := idempotency.Answer{Kind: idempotency.KindCreated, Body: []byte(`{"id":"pay_1"}`)}
		if err := tx.IdempotencyKeyComplete(c.ctx, id, ans, at(3)); err != nil {
			return err
		}
		// A completed key is never marked unknown.
		return tx.IdempotencyKeyMarkUnknown(c.ctx, id, at(4))
	}, func(r *idempotency.Record) {
		done := at(3)
		r.State, r.LeaseExpiresAt, r.ResponseKind, r.ResponseBody, r.CompletedAt =
			idempotency.StateCompleted, nil, idempotency.KindCreated, []byte(`{"id":"pay_1"}`), &done
	})
	step("KeyDetachAttempt", func(c *conf, tx payment.Tx, id int64) error {
		return tx.IdempotencyKeyDetachAttempt(c.ctx, id)
	}, func(r *idempotency.Record) { r.AttemptID = "" })
}

func insert(t *testing.T, c *conf, ps ...*payment.Payment) {
	t.Helper()
	c.tx(t, func(tx payment.Tx) error {
		for _, p := range ps {
			if err := tx.PaymentInsert(c.ctx, p); err != nil {
				return err
			}
		}
		return nil
	})
}

func conformPayments(t *testing.T) {
	t.Parallel()
	t.Run("PaymentInsert", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		p := newPayment("pay_2", "pedido-900", 1, payment.StatusProcessing)
		insert(t, c, p)
		got, err := c.store.PaymentGetByID(c.ctx, "acct_1", "pay_2")
		if err != nil {
			t.Fatal(err)
		}
		same(t, "payment", utcPayment(got), stored(p))
		// A second live payment of the order is refused; one that ended
		// is not.
		err = c.store.WithTx(c.ctx, func(tx payment.Tx) error {
			return tx.PaymentInsert(c.ctx, newPayment("pay_3", "pedido-900", 2, payment.StatusProcessing))
		})
		if !errors.Is(err, payment.ErrLiveOrderConflict) {
			t.Fatalf("second live payment: err = %v, want ErrLiveOrderConflict", err)
		}
		insert(t, c, newPayment("pay_4", "pedido-900", 2, payment.StatusDeclined))
		// The order's attempt numbers are unique.
		err = c.store.WithTx(c.ctx, func(tx payment.Tx) error {
			return tx.PaymentInsert(c.ctx, newPayment("pay_5", "pedido-900", 2, payment.StatusFailed))
		})
		if !errors.Is(err, payment.ErrAttemptNumberTaken) {
			t.Fatalf("attempt number again: err = %v, want ErrAttemptNumberTaken", err)
		}
	})
	t.Run("PaymentGetByID", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		got, err := c.store.PaymentGetByID(c.ctx, "acct_1", "pay_1")
		if err != nil {
			t.Fatal(err)
		}
		same(t, "seeded payment", utcPayment(got), utcPayment(c.p))
		_, err = c.store.PaymentGetByID(c.ctx, "acct_other", "pay_1")
		wantNotFound(t, "PaymentGetByID of another account", err)
		_, err = c.store.PaymentGetByID(c.ctx, "acct_1", "pay_none")
		wantNotFound(t, "PaymentGetByID of a missing payment", err)
	})
	t.Run("PaymentGetAnyAccount", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		got, err := c.store.PaymentGetAnyAccount(c.ctx, "pay_1")
		if err != nil {
			t.Fatal(err)
		}
		same(t, "payment", utcPayment(got), utcPayment(c.p))
		_, err = c.store.PaymentGetAnyAccount(c.ctx, "pay_none")
		wantNotFound(t, "PaymentGetAny of a missing payment", err)
	})
	t.Run("PaymentGetByIDForUpdate", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		c.tx(t, func(tx payment.Tx) error {
			got, err := tx.PaymentGetByIDForUpdate(c.ctx, "acct_1", "pay_1")
			if err != nil {
				return err
			}
			same(t, "locked payment", utcPayment(got), utcPayment(c.p))
			_, err = tx.PaymentGetByIDForUpdate(c.ctx, "acct_1", "pay_none")
			wantNotFound(t, "PaymentGetByIDForUpdate of a missing payment", err)
			return nil
		})
	})
}

func conformPaymentWrites(t *testing.T) {
	t.Parallel()
	t.Run("PaymentUpdateState", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		exp := at(600)
		want := utcPayment(c.p)
		want.Status, want.ProviderPaymentID, want.AmountCaptured, want.AmountRefunded = payment.StatusCaptured, "pi_9", 2000, 500
		want.ProviderAmountRefunded, want.FailureCode, want.FailureMessage = 400, "card_declined", "Recusado"
		want.ClientSecret, want.ActionExpiresAt, want.Attempt, want.UpdatedAt = "pi_9_secret", &exp, 2, at(10)
		want.NextAction = &payment.NextAction{Type: "redirect_to_url"}
		// Under the lock, then without it: each update counts a version.
		c.tx(t, func(tx payment.Tx) error {
			p, err := tx.PaymentGetByIDForUpdate(c.ctx, "acct_1", "pay_1")
			if err != nil {
				return err
			}
			*p = *want
			p.Version = 1
			if err := tx.PaymentUpdateState(c.ctx, p); err != nil {
				return err
			}
			same(t, "version after a locked update", p.Version, int64(2))
			return nil
		})
		want.Version = 3
		c.tx(t, func(tx payment.Tx) error {
			p := *want
			if err := tx.PaymentUpdateState(c.ctx, &p); err != nil {
				return err
			}
			same(t, "version after an update", p.Version, int64(3))
			return nil
		})
		got, err := c.store.PaymentGetByID(c.ctx, "acct_1", "pay_1")
		if err != nil {
			t.Fatal(err)
		}
		same(t, "updated payment", utcPayment(got), want)
	})
	t.Run("PaymentSetDisputes", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		due := at(86400)
		want := utcPayment(c.p)
		want.Disputes = []payment.Dispute{{ID: "dp_1", Amount: 2000, Reason: "fraudulent", Status: "needs_response", EvidenceDueBy: &due}}
		want.UpdatedAt, want.Version = at(20), 2
		c.tx(t, func(tx payment.Tx) error {
			p := *want
			p.Version = 1
			if err := tx.PaymentSetDisputes(c.ctx, &p); err != nil {
				return err
			}
			same(t, "version", p.Version, int64(2))
			return nil
		})
		got, err := c.store.PaymentGetByID(c.ctx, "acct_1", "pay_1")
		if err != nil {
			t.Fatal(err)
		}
		same(t, "payment with disputes", utcPayment(got), want)
	})
}

func conformPaymentLists(t *testing.T) {
	t.Parallel()
	t.Run("PaymentListByOrder", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		p2 := newPayment("pay_2", "pedido-900", 1, payment.StatusDeclined)
		p3 := newPayment("pay_3", "pedido-900", 2, payment.StatusProcessing)
		p3.CreatedAt, p3.UpdatedAt = at(5), at(5)
		insert(t, c, p3, p2)
		got, err := c.store.PaymentListByOrder(c.ctx, "acct_1", "pedido-900", 10)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "oldest first", []*payment.Payment{utcPayment(got[0]), utcPayment(got[1])}, []*payment.Payment{stored(p2), stored(p3)})
		got, _ = c.store.PaymentListByOrder(c.ctx, "acct_1", "pedido-900", 1)
		same(t, "limited", len(got), 1)
		got, _ = c.store.PaymentListByOrder(c.ctx, "acct_1", "pedido-none", 10)
		same(t, "another order", len(got), 0)
	})
	t.Run("PaymentGetLiveByOrder", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		p2 := newPayment("pay_2", "pedido-900", 1, payment.StatusDeclined)
		p3 := newPayment("pay_3", "pedido-900", 2, payment.StatusAuthorized)
		insert(t, c, p2, p3)
		got, err := c.store.PaymentGetLiveByOrder(c.ctx, "acct_1", "pedido-900")
		if err != nil {
			t.Fatal(err)
		}
		same(t, "live payment", utcPayment(got), stored(p3))
		_, err = c.store.PaymentGetLiveByOrder(c.ctx, "acct_1", "pedido-none")
		wantNotFound(t, "PaymentLiveByOrder of an order without payments", err)
	})
	t.Run("PaymentGetByProviderID", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		want := utcPayment(c.p)
		want.ProviderPaymentID, want.Version = "pi_7", 2
		c.tx(t, func(tx payment.Tx) error { p := *want; return tx.PaymentUpdateState(c.ctx, &p) })
		got, err := c.store.PaymentGetByProviderID(c.ctx, "acct_1", "pi_7")
		if err != nil {
			t.Fatal(err)
		}
		same(t, "payment", utcPayment(got), want)
		_, err = c.store.PaymentGetByProviderID(c.ctx, "acct_other", "pi_7")
		wantNotFound(t, "PaymentByProviderID of another account", err)
	})
	t.Run("PaymentListStuck", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		p2 := newPayment("pay_2", "pedido-900", 1, payment.StatusUnknown)
		p3 := newPayment("pay_3", "pedido-901", 1, payment.StatusUnknown)
		p3.CreatedAt, p3.UpdatedAt = at(5), at(5)
		insert(t, c, p2, p3)
		c.tx(t, func(tx payment.Tx) error {
			return tx.AttemptInsert(c.ctx, newAttempt(p3, "att_3", payment.OpAuthorize, 1, at(5)))
		})
		q := operations.StuckQuery{Statuses: []payment.Status{payment.StatusUnknown}, UpdatedBefore: at(60), AlertBefore: at(30), Limit: 10}
		got, err := c.store.PaymentListStuck(c.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "stuck", len(got), 2)
		same(t, "first", []any{utcPayment(got[0].Payment), got[0].NeedsAttention}, []any{stored(p2), false})
		same(t, "second", []any{utcPayment(got[1].Payment), got[1].NeedsAttention}, []any{stored(p3), true})
		q.After = operations.StuckCursor{UpdatedAt: at(0), ID: "pay_2"}
		got, _ = c.store.PaymentListStuck(c.ctx, q)
		same(t, "after the first", len(got), 1)
		q.After, q.UpdatedBefore = operations.StuckCursor{}, at(1)
		got, _ = c.store.PaymentListStuck(c.ctx, q)
		same(t, "updated before", len(got), 1)
	})
}

func insertAttempts(t *testing.T, c *conf, as ...*payment.Attempt) {
	t.Helper()
	c.tx(t, func(tx payment.Tx) error {
		for _, a := range as {
			if err := tx.AttemptInsert(c.ctx, a); err != nil {
				return err
			}
		}
		return nil
	})
}

// attemptGet reads an attempt back through a transaction.
func attemptGet(t *testing.T, c *conf, id string) *payment.Attempt {
	t.Helper()
	var a *payment.Attempt
	c.tx(t, func(tx payment.Tx) (err error) { a, err = tx.AttemptGetByID(c.ctx, id); return err })
	return utcAttempt(a)
}

func conformAttempts(t *testing.T) {
	t.Parallel()
	t.Run("AttemptInsert", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		lease := at(30)
		a := newAttempt(c.p, "att_1", payment.OpAuthorize, 1, at(0))
		a.LeaseExpiresAt = &lease
		insertAttempts(t, c, a)
		same(t, "attempt", attemptGet(t, c, "att_1"), a)
	})
	t.Run("AttemptGetByID", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		err := c.store.WithTx(c.ctx, func(tx payment.Tx) error { _, err := tx.AttemptGetByID(c.ctx, "att_none"); return err })
		wantNotFound(t, "AttemptGetByID of a missing attempt", err)
	})
	t.Run("AttemptNextNumber", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		next := func(op payment.Operation) (n int) {
			c.tx(t, func(tx payment.Tx) (err error) {
				n, err = tx.AttemptNextNumber(c.ctx, "acct_1", c.p.OrderID, op)
				return err
			})
			return n
		}
		same(t, "first", next(payment.OpAuthorize), 1)
		insertAttempts(t, c, newAttempt(c.p, "att_1", payment.OpAuthorize, 1, at(0)), newAttempt(c.p, "att_2", payment.OpAuthorize, 2, at(1)))
		same(t, "after two", next(payment.OpAuthorize), 3)
		same(t, "another operation", next(payment.OpCapture), 1)
		// A number taken twice is ErrAttemptNumberTaken.
		err := c.store.WithTx(c.ctx, func(tx payment.Tx) error {
			return tx.AttemptInsert(c.ctx, newAttempt(c.p, "att_3", payment.OpAuthorize, 2, at(2)))
		})
		if !errors.Is(err, payment.ErrAttemptNumberTaken) {
			t.Fatalf("number again: err = %v, want ErrAttemptNumberTaken", err)
		}
	})
	t.Run("AttemptSetLease", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		a := newAttempt(c.p, "att_1", payment.OpAuthorize, 1, at(0))
		insertAttempts(t, c, a)
		c.tx(t, func(tx payment.Tx) error { return tx.AttemptSetLease(c.ctx, "att_1", at(45), at(15)) })
		lease := at(45)
		a.LeaseExpiresAt, a.UpdatedAt = &lease, at(15)
		same(t, "leased attempt", attemptGet(t, c, "att_1"), a)
	})
	t.Run("AttemptUpdateOutcome", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		lease := at(30)
		a := newAttempt(c.p, "att_1", payment.OpAuthorize, 1, at(0))
		a.LeaseExpiresAt = &lease
		insertAttempts(t, c, a)
		a.Status, a.ProviderObjectID, a.FailureCode, a.FailureMessage, a.UpdatedAt =
			payment.AttemptDeclined, "pi_3", "card_declined", "Recusado", at(20)
		c.tx(t, func(tx payment.Tx) error { return tx.AttemptUpdateOutcome(c.ctx, a) })
		a.LeaseExpiresAt = nil
		same(t, "resolved attempt", attemptGet(t, c, "att_1"), a)
		// Waiting starts its own reconcile schedule.
		due := at(300)
		a.Status, a.NextReconcileAt, a.UpdatedAt = payment.AttemptWaiting, &due, at(25)
		c.tx(t, func(tx payment.Tx) error { return tx.AttemptUpdateOutcome(c.ctx, a) })
		same(t, "waiting attempt", attemptGet(t, c, "att_1"), a)
	})
}

// threeAttempts stores an authorize that succeeded, a capture processing
// and a refund unknown, of pay_1, one second apart.
func threeAttempts(t *testing.T, c *conf) []*payment.Attempt {
	t.Helper()
	as := []*payment.Attempt{newAttempt(c.p, "att_1", payment.OpAuthorize, 1, at(0)),
		newAttempt(c.p, "att_2", payment.OpCapture, 1, at(1)), newAttempt(c.p, "att_3", payment.OpRefund, 1, at(2))}
	insertAttempts(t, c, as...)
	as[0].Status, as[0].UpdatedAt = payment.AttemptSucceeded, at(3)
	as[2].Status, as[2].UpdatedAt = payment.AttemptUnknown, at(4)
	c.tx(t, func(tx payment.Tx) error {
		return errors.Join(tx.AttemptUpdateOutcome(c.ctx, as[0]), tx.AttemptUpdateOutcome(c.ctx, as[2]))
	})
	return as
}

func conformAttemptReads(t *testing.T) {
	t.Parallel()
	t.Run("AttemptListByPayment", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		as := threeAttempts(t, c)
		got, err := c.store.AttemptListByPayment(c.ctx, "pay_1")
		if err != nil {
			t.Fatal(err)
		}
		same(t, "attempts", utcAttempts(got), as)
	})
	t.Run("AttemptListUnresolvedByPayment", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		as := threeAttempts(t, c)
		got, err := c.store.AttemptListUnresolvedByPayment(c.ctx, "pay_1")
		if err != nil {
			t.Fatal(err)
		}
		same(t, "unresolved", utcAttempts(got), as[1:])
	})
	t.Run("AttemptCountNeedingAttentionByProvider", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		threeAttempts(t, c)
		mp := newAttempt(c.p, "att_mp", payment.OpAuthorize, 2, at(1))
		mp.Provider = payment.ProviderMercadoPago
		insertAttempts(t, c, mp)
		for before, want := range map[int]map[string]int{0: {}, 2: {"stripe": 1, "mercadopago": 1}, 3: {"stripe": 2, "mercadopago": 1}} {
			n, err := c.store.AttemptCountNeedingAttentionByProvider(c.ctx, at(before))
			if err != nil {
				t.Fatal(err)
			}
			same(t, fmt.Sprintf("created before %d s", before), n, want)
		}
	})
	t.Run("AttemptLatestByPayment", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		as := threeAttempts(t, c)
		a4 := newAttempt(c.p, "att_4", payment.OpCapture, 2, at(0))
		insertAttempts(t, c, a4)
		c.tx(t, func(tx payment.Tx) error {
			got, err := tx.AttemptLatestByPayment(c.ctx, "pay_1", payment.OpCapture)
			if err != nil {
				return err
			}
			same(t, "highest number", utcAttempt(got), a4)
			if got, err = tx.AttemptLatestByPayment(c.ctx, "pay_1", payment.OpAuthorize); err != nil {
				return err
			}
			same(t, "authorize", utcAttempt(got), as[0])
			_, err = tx.AttemptLatestByPayment(c.ctx, "pay_1", payment.OpCancel)
			wantNotFound(t, "AttemptLatest of an operation never tried", err)
			return nil
		})
	})
	t.Run("AttemptCountUnresolvedByPaymentOps", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		threeAttempts(t, c)
		c.tx(t, func(tx payment.Tx) error {
			for ops, want := range map[[2]payment.Operation]int{{payment.OpAuthorize, payment.OpCapture}: 1,
				{payment.OpCapture, payment.OpRefund}: 2, {payment.OpCancel}: 0} {
				n, err := tx.AttemptCountUnresolvedByPaymentOps(c.ctx, "pay_1", ops[:]...)
				if err != nil {
					return err
				}
				same(t, fmt.Sprint(ops), n, want)
			}
			return nil
		})
	})
	t.Run("AttemptCancelHoldingOrder", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		held := func() (string, error) {
			var id string
			err := c.store.WithTx(c.ctx, func(tx payment.Tx) (err error) {
				id, err = tx.AttemptCancelHoldingOrder(c.ctx, "acct_1", c.p.OrderID)
				return err
			})
			return id, err
		}
		insertAttempts(t, c, newAttempt(c.p, "att_c", payment.OpCancel, 1, at(0)))
		_, err := held()
		wantNotFound(t, "a cancel of a live payment", err)
		p := utcPayment(c.p)
		p.Status = payment.StatusDeclined
		c.tx(t, func(tx payment.Tx) error { return tx.PaymentUpdateState(c.ctx, p) })
		id, err := held()
		same(t, "held by", []any{id, err}, []any{"pay_1", nil})
	})
}

func conformAttemptClaims(t *testing.T) {
	t.Parallel()
	t.Run("AttemptClaimByID", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		as := threeAttempts(t, c)
		got, err := c.store.AttemptClaimByID(c.ctx, "att_2", at(10), at(40))
		if err != nil {
			t.Fatal(err)
		}
		lease := at(40)
		as[1].LeaseExpiresAt = &lease
		same(t, "claimed", utcAttempt(got), as[1])
		_, err = c.store.AttemptClaimByID(c.ctx, "att_2", at(20), at(50))
		wantNotFound(t, "a claim under another's lease", err)
		_, err = c.store.AttemptClaimByID(c.ctx, "att_1", at(20), at(50))
		wantNotFound(t, "a claim of a resolved attempt", err)
		if _, err = c.store.AttemptClaimByID(c.ctx, "att_2", at(41), at(70)); err != nil {
			t.Fatalf("a claim once the lease ran out: %v", err)
		}
	})
	t.Run("AttemptClaimNext", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		as := threeAttempts(t, c)
		due := reconcile.Due{UpdatedBefore: at(5), Before: at(100)}
		var tries []int
		nextDue := func(n int) time.Time { tries = append(tries, n); return at(200 + len(tries)) }
		// The one untouched longest first (att_2 at 1 s, att_3 at 4 s),
		// leased and counted, never the one already leased.
		for i, want := range []*payment.Attempt{as[1], as[2]} {
			got, err := c.store.AttemptClaimNext(c.ctx, due, at(10), at(40), nextDue)
			if err != nil {
				t.Fatal(err)
			}
			lease, next := at(40), at(201+i)
			want.LeaseExpiresAt, want.NextReconcileAt, want.ReconcileTries = &lease, &next, 1
			same(t, "claimed", utcAttempt(got), want)
		}
		same(t, "tries passed to nextDue", tries, []int{1, 1})
		_, err := c.store.AttemptClaimNext(c.ctx, due, at(10), at(40), nextDue)
		wantNotFound(t, "nothing due", err)
		// Past their lease and next time, claimed again: the count grows.
		got, err := c.store.AttemptClaimNext(c.ctx, reconcile.Due{UpdatedBefore: at(5), Before: at(300)}, at(250), at(280), nextDue)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "second claim", []any{got.ID, got.ReconcileTries, tries[2]}, []any{"att_2", 2, 2})
	})
}

// setupRefunds stores two processing refunds of pay_1: 300 and 700.
func setupRefunds(t *testing.T) (*conf, []*payment.Refund) {
	t.Helper()
	c := newConf(t)
	threeAttempts(t, c)
	insertAttempts(t, c, newAttempt(c.p, "att_r2", payment.OpRefund, 2, at(5)))
	rs := []*payment.Refund{
		{ID: "re_1", AccountID: "acct_1", PaymentID: "pay_1", AttemptID: "att_3", Amount: 300, Status: payment.RefundProcessing, CreatedAt: at(2), UpdatedAt: at(2)},
		{ID: "re_2", AccountID: "acct_1", PaymentID: "pay_1", AttemptID: "att_r2", Amount: 700, Status: payment.RefundProcessing, CreatedAt: at(5), UpdatedAt: at(5)},
	}
	c.tx(t, func(tx payment.Tx) error {
		return errors.Join(tx.RefundInsert(c.ctx, rs[0]), tx.RefundInsert(c.ctx, rs[1]))
	})
	return c, rs
}

func conformRefunds(t *testing.T) {
	t.Parallel()
	t.Run("RefundInsert", func(t *testing.T) {
		t.Parallel()
		c, rs := setupRefunds(t)
		c.tx(t, func(tx payment.Tx) error {
			got, err := tx.RefundGetByAttempt(c.ctx, "att_r2")
			same(t, "refund", []any{utcRefund(got), err}, []any{rs[1], nil})
			_, err = tx.RefundGetByAttempt(c.ctx, "att_1")
			wantNotFound(t, "RefundGetByAttempt of an attempt without refund", err)
			return nil
		})
	})
	t.Run("RefundGetByAttempt", func(t *testing.T) {
		t.Parallel()
		c, rs := setupRefunds(t)
		got, err := c.store.RefundGetByAttempt(c.ctx, "att_3")
		same(t, "refund", []any{utcRefund(got), err}, []any{rs[0], nil})
		_, err = c.store.RefundGetByAttempt(c.ctx, "att_none")
		wantNotFound(t, "RefundGetByAttempt of a missing attempt", err)
	})
	t.Run("RefundUpdateOutcome", func(t *testing.T) {
		t.Parallel()
		c, rs := setupRefunds(t)
		rs[0].Status, rs[0].ProviderRefundID, rs[0].UpdatedAt = payment.RefundSucceeded, "re_p1", at(9)
		c.tx(t, func(tx payment.Tx) error {
			if err := tx.RefundUpdateOutcome(c.ctx, rs[0]); err != nil {
				return err
			}
			got, err := tx.RefundGetByAttempt(c.ctx, "att_3")
			if err != nil {
				return err
			}
			same(t, "updated refund", utcRefund(got), rs[0])
			return nil
		})
	})
	t.Run("RefundPending", func(t *testing.T) {
		t.Parallel()
		c, rs := setupRefunds(t)
		rs[0].Status, rs[0].UpdatedAt = payment.RefundSucceeded, at(9)
		c.tx(t, func(tx payment.Tx) error {
			pending, err := tx.RefundSumPending(c.ctx, "pay_1")
			same(t, "pending before", []any{pending, err}, []any{int64(1000), nil})
			if err := tx.RefundUpdateOutcome(c.ctx, rs[0]); err != nil {
				return err
			}
			pending, err = tx.RefundSumPending(c.ctx, "pay_1")
			same(t, "pending after", []any{pending, err}, []any{int64(700), nil})
			return nil
		})
	})
	t.Run("RefundSumSucceeded", func(t *testing.T) {
		t.Parallel()
		c, rs := setupRefunds(t)
		rs[0].Status, rs[0].UpdatedAt = payment.RefundSucceeded, at(9)
		c.tx(t, func(tx payment.Tx) error {
			sum, err := tx.RefundSumSucceeded(c.ctx, "pay_1")
			same(t, "none yet", []any{sum, err}, []any{int64(0), nil})
			if err := tx.RefundUpdateOutcome(c.ctx, rs[0]); err != nil {
				return err
			}
			sum, err = tx.RefundSumSucceeded(c.ctx, "pay_1")
			same(t, "succeeded", []any{sum, err}, []any{int64(300), nil})
			return nil
		})
	})
}

func conformAudit(t *testing.T) {
	t.Parallel()
	t.Run("AuditInsert", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		es := []payment.AuditEntry{
			{AccountID: "acct_1", PaymentID: "pay_1", At: at(2), Actor: "ops:ana", Action: "resolve", Reason: "provider says paid", Details: map[string]any{"attempt": "att_1"}},
			{AccountID: "acct_1", PaymentID: "pay_1", At: at(1), Actor: "ops:rui", Action: "replay", Reason: "retry", Details: map[string]any{}},
		}
		c.tx(t, func(tx payment.Tx) error {
			return errors.Join(tx.AuditInsert(c.ctx, es[0]), tx.AuditInsert(c.ctx, es[1]))
		})
		got, err := c.store.AuditListByPayment(c.ctx, "pay_1")
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			got[i].At = got[i].At.UTC()
		}
		same(t, "audit trail, in insertion order", got, es)
	})
	t.Run("AuditListByPayment", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		got, err := c.store.AuditListByPayment(c.ctx, "pay_none")
		same(t, "no entries", []any{len(got), err}, []any{0, nil})
	})
}

// feed waits until the feed serves n events of acct_1 after pos: the feed
// serves nothing above the horizon of running transactions, which other
// tests on the server hold back for a moment.
func feed(t *testing.T, c *conf, after payment.FeedPosition, limit, n int) []payment.FeedEvent {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		evs, err := c.store.EventListAfter(c.ctx, "acct_1", after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) >= n || time.Now().After(deadline) {
			return evs
		}
	}
}

func conformEvents(t *testing.T) {
	t.Parallel()
	t.Run("EventListAfter", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		ev := func(id string) payment.Event {
			return payment.Event{ID: id, AccountID: "acct_1", PaymentID: "pay_1", Type: "payment.updated", CreatedAt: at(0),
				Payload: json.RawMessage(`{"id":"` + id + `"}`)}
		}
		c.tx(t, func(tx payment.Tx) error {
			return errors.Join(tx.EventInsert(c.ctx, ev("evt_1")), tx.EventInsert(c.ctx, ev("evt_2")))
		})
		c.tx(t, func(tx payment.Tx) error { return tx.EventInsert(c.ctx, ev("evt_3")) })
		evs := feed(t, c, payment.FeedPosition{}, 10, 3)
		var ids []string
		for _, e := range evs {
			var v struct{ ID string }
			if err := json.Unmarshal(e.Payload, &v); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, v.ID)
		}
		same(t, "feed order", ids, []string{"evt_1", "evt_2", "evt_3"})
		same(t, "one transaction's xid", evs[0].Position.Xid == evs[1].Position.Xid && evs[1].Position.Seq > evs[0].Position.Seq, true)
		same(t, "a later transaction's", evs[2].Position.Xid > evs[1].Position.Xid, true)
		same(t, "after the first", feed(t, c, evs[0].Position, 10, 2), evs[1:])
		same(t, "limited", feed(t, c, payment.FeedPosition{}, 1, 1), evs[:1])
		same(t, "after the last", len(feed(t, c, evs[2].Position, 10, 0)), 0)
	})
	t.Run("EventInsert", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		e := payment.Event{ID: "evt_1", AccountID: "acct_1", PaymentID: "pay_1", Type: "payment.captured", CreatedAt: at(0),
			Payload: json.RawMessage(`{"id": "evt_1", "type": "payment.captured"}`)}
		c.tx(t, func(tx payment.Tx) error { return tx.EventInsert(c.ctx, e) })
		evs := feed(t, c, payment.FeedPosition{}, 10, 1)
		same(t, "events", len(evs), 1)
		same(t, "payload, as jsonb gives it back", string(evs[0].Payload), `{"id": "evt_1", "type": "payment.captured"}`)
	})
	t.Run("AccountFeedCursorAdvance", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		c.tx(t, func(tx payment.Tx) error {
			return tx.EventInsert(c.ctx, payment.Event{ID: "evt_1", AccountID: "acct_1", Type: "payment.updated", CreatedAt: at(0), Payload: json.RawMessage(`{}`)})
		})
		evs := feed(t, c, payment.FeedPosition{}, 10, 1)
		// No consumer has ever moved the cursor: nobody falls behind.
		unread, _, err := c.store.EventBacklog(c.ctx, at(10))
		same(t, "unread before any cursor", []any{unread, err}, []any{int64(0), nil})
		if err := c.store.AccountFeedCursorAdvance(c.ctx, "acct_1", evs[0].Position, at(5)); err != nil {
			t.Fatal(err)
		}
		unread, _, err = c.store.EventBacklog(c.ctx, at(10))
		same(t, "unread after", []any{unread, err}, []any{int64(0), nil})
		c.tx(t, func(tx payment.Tx) error {
			return tx.EventInsert(c.ctx, payment.Event{ID: "evt_2", AccountID: "acct_1", Type: "payment.updated", CreatedAt: at(6), Payload: json.RawMessage(`{}`)})
		})
		unread, age, err := c.store.EventBacklog(c.ctx, at(10))
		same(t, "unread behind an active consumer", []any{unread, age, err}, []any{int64(1), 4 * time.Second, nil})
		// A consumer silent for longer than the window no longer counts.
		window := int(postgres.FeedConsumerWindow / time.Second)
		unread, _, _ = c.store.EventBacklog(c.ctx, at(5+window))
		same(t, "unread at the window's end", unread, int64(1))
		unread, _, _ = c.store.EventBacklog(c.ctx, at(6+window))
		same(t, "unread after the window", unread, int64(0))
		// A cursor never moves back, and passing an older one is no read.
		if err := c.store.AccountFeedCursorAdvance(c.ctx, "acct_1", payment.FeedPosition{}, at(20)); err != nil {
			t.Fatal(err)
		}
		unread, _, _ = c.store.EventBacklog(c.ctx, at(6+window))
		same(t, "unread after an older cursor, past the window", unread, int64(0))
		unread, _, _ = c.store.EventBacklog(c.ctx, at(10))
		same(t, "unread after an older cursor", unread, int64(1))
	})
}

func conformWebhooks(t *testing.T) {
	t.Parallel()
	t.Run("WebhooksEnqueue", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		ws := postgres.NewWebhookStore(c.b.db)
		for i, events := range [][]string{{"payment.updated"}, {"*"}, {"refund.updated"}} {
			e := &notify.Endpoint{ID: fmt.Sprintf("we_%d", i), AccountID: "acct_1", URL: "https://loja.example/hook",
				EnabledEvents: events, Status: notify.StatusEnabled, SecretEnc: []byte("enc"),
				CreateKeyHash: []byte(fmt.Sprint("k", i)), CreateFingerprint: []byte("fp"), CreatedAt: at(0), UpdatedAt: at(0)}
			if _, _, err := ws.EndpointInsert(c.ctx, e, 10); err != nil {
				t.Fatal(err)
			}
		}
		e := payment.Event{ID: "evt_1", AccountID: "acct_1", PaymentID: "pay_1", Type: "payment.updated", CreatedAt: at(0), Payload: json.RawMessage(`{}`)}
		c.tx(t, func(tx payment.Tx) error { return errors.Join(tx.EventInsert(c.ctx, e), tx.WebhooksEnqueue(c.ctx, e)) })
		// Again while they wait: nothing more.
		c.tx(t, func(tx payment.Tx) error { return tx.WebhooksEnqueue(c.ctx, e) })
		rows, err := c.b.admin.Query(c.ctx, `SELECT args->>'endpoint_id' FROM river_job WHERE args->>'event_id' = 'evt_1' ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		same(t, "delivery jobs", []any{got, err}, []any{[]string{"we_0", "we_1"}, nil})
	})
	t.Run("ProviderEventReceiptInsert", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		r := inbound.Receipt{AccountID: "acct_1", EventID: "evt_stripe_1", Type: "payment_intent.succeeded",
			Outcome: inbound.Ignored, PaymentID: "pay_1", ReceivedAt: at(0)}
		for _, want := range []bool{true, false} {
			c.tx(t, func(tx payment.Tx) error {
				ok, err := tx.(inbound.Tx).ProviderEventReceiptInsert(c.ctx, r)
				same(t, "stored", []any{ok, err}, []any{want, nil})
				return nil
			})
		}
	})
}

func conformTransactions(t *testing.T) {
	t.Parallel()
	t.Run("WithTx", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		boom := errors.New("boom")
		err := c.store.WithTx(c.ctx, func(tx payment.Tx) error {
			if err := tx.PaymentInsert(c.ctx, newPayment("pay_2", "pedido-900", 1, payment.StatusProcessing)); err != nil {
				return err
			}
			return boom
		})
		same(t, "fn's error", err, boom)
		_, err = c.store.PaymentGetByID(c.ctx, "acct_1", "pay_2")
		wantNotFound(t, "a payment of a rolled back transaction", err)
	})
	// The business-sized methods answer as the calls they combine would.
	t.Run("IdempotencyKeyReserveNumbered", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		insertAttempts(t, c, newAttempt(c.p, "att_1", payment.OpAuthorize, 1, at(0)))
		c.tx(t, func(tx payment.Tx) error {
			res := payment.Reservation{Scope: idempotency.Scope{AccountID: "acct_1", Operation: "create",
				KeyHash: []byte("kh")}, Fingerprint: []byte("fp"), LeaseUntil: at(30), Now: at(0)}
			_, ok, n, err := tx.IdempotencyKeyReserveNumbered(c.ctx, res, c.p.OrderID, payment.OpAuthorize)
			same(t, "first", []any{ok, n, err}, []any{true, 2, nil})
			_, ok, n, err = tx.IdempotencyKeyReserveNumbered(c.ctx, res, c.p.OrderID, payment.OpAuthorize)
			same(t, "second", []any{ok, n, err}, []any{false, 0, nil})
			return nil
		})
	})
	t.Run("IdempotencyKeyGetForUpdateWithPayment", func(t *testing.T) {
		t.Parallel()
		c := newConf(t)
		a := newAttempt(c.p, "att_1", payment.OpAuthorize, 1, at(0))
		insertAttempts(t, c, a)
		sc := idempotency.Scope{AccountID: "acct_1", Operation: "create", KeyHash: []byte("kh")}
		c.tx(t, func(tx payment.Tx) error {
			_, _, err := tx.IdempotencyKeyReserve(c.ctx, payment.Reservation{Scope: sc, Fingerprint: []byte("fp"),
				LeaseUntil: at(30), PaymentID: "pay_1", AttemptID: "att_1", Now: at(0)})
			return err
		})
		c.tx(t, func(tx payment.Tx) error {
			rec, p, got, err := tx.IdempotencyKeyGetForUpdateWithPayment(c.ctx, sc, "pay_1", "att_1")
			same(t, "KeyLockForSettle", []any{rec.AttemptID, utcPayment(p), utcAttempt(got), err},
				[]any{"att_1", utcPayment(c.p), a, nil})
			_, _, _, err = tx.IdempotencyKeyGetForUpdateWithPayment(c.ctx, idempotency.Scope{AccountID: "acct_1", Operation: "create",
				KeyHash: []byte("none")}, "pay_1", "att_1")
			wantNotFound(t, "an unknown key", err)
			return nil
		})
	})
}
