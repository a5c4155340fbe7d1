package postgres_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/jackc/pgx/v5"
)

// bundle is what a store test works with besides the store.
type bundle struct {
	db *postgres.DB
	// admin is a connection outside the store's pool: another transaction.
	admin   *pgx.Conn
	payment *payment.Payment // seeded, processing
}

// setup returns the payment store on a fresh database holding one account
// and one processing payment. dbSettings are set with ALTER DATABASE before
// the store's pool connects, as a server's configuration would be.
func setup(t *testing.T, dbSettings []string, opts ...postgres.Option) (*postgres.PaymentStore, *bundle) {
	t.Helper()
	ctx := context.Background()
	dbURL := postgrestest.URL(t)
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	for _, s := range dbSettings {
		if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s SET %s", pgx.Identifier{dbName(t, dbURL)}.Sanitize(), s)); err != nil {
			t.Fatal(err)
		}
	}
	db, err := postgres.Open(ctx, dbURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	store := postgres.NewPaymentStore(db)
	return store, &bundle{db: db, admin: admin, payment: seed(t, db, store)}
}

func dbName(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// seed stores an account and one processing payment of it.
func seed(t *testing.T, db *postgres.DB, store *postgres.PaymentStore) *payment.Payment {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if err := postgres.NewAccountStore(db).AccountInsert(ctx, account.Row{
		ID: "acct_1", Name: "Loja Um", APIKeyHash: []byte(rand.Text()), StripeSecretEnc: []byte("enc"),
		StripeSecretHMAC: []byte(rand.Text()), CreatedAt: now,
	}); err != nil {
		t.Fatal(err)
	}
	p := &payment.Payment{
		ID: "pay_1", AccountID: "acct_1", OrderID: "pedido-842", Attempt: 1, Amount: 2000, Currency: "BRL",
		CaptureMethod: "manual", PaymentMethod: "pm_card_visa", Status: payment.StatusProcessing,
		CreatedAt: now, UpdatedAt: now,
	}
	if err := store.WithTx(ctx, func(tx payment.Tx) error { return tx.PaymentInsert(ctx, p) }); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWithTx(t *testing.T) {
	t.Parallel()

	// The server's default is not the store's: every transaction states
	// its level.
	t.Run("BeginsAtReadCommittedWhateverTheServerDefault", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, _ := setup(t, []string{"default_transaction_isolation = 'repeatable read'"})
		var got string
		err := store.WithTx(ctx, func(tx payment.Tx) error {
			return postgres.RawTx(tx).QueryRow(ctx, "SHOW transaction_isolation").Scan(&got)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got != "read committed" {
			t.Fatalf("transaction_isolation = %q, want %q", got, "read committed")
		}
	})

	// The money path locks a payment and decides on what the lock returns:
	// that must be the latest commit, even one made after the transaction
	// took its first snapshot. At REPEATABLE READ the lock fails instead
	// (could not serialize access due to concurrent update).
	t.Run("LockReadsTheLatestCommit", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, b := setup(t, []string{"default_transaction_isolation = 'repeatable read'"})
		var locked *payment.Payment
		err := store.WithTx(ctx, func(tx payment.Tx) (err error) {
			// Any first statement takes the snapshot.
			if _, err := tx.AttemptGetByID(ctx, "att_none"); !errors.Is(err, payment.ErrNotFound) {
				return fmt.Errorf("first read: %w", err)
			}
			// Another transaction, say a webhook, records the outcome.
			if _, err := b.admin.Exec(ctx, `UPDATE payments SET status = 'authorized' WHERE id = $1`, b.payment.ID); err != nil {
				return err
			}
			locked, err = tx.PaymentGetByIDForUpdate(ctx, b.payment.AccountID, b.payment.ID)
			return err
		})
		if err != nil {
			t.Fatalf("lock after another transaction's commit: %v", err)
		}
		if locked.Status != payment.StatusAuthorized {
			t.Fatalf("locked payment status = %s, want %s", locked.Status, payment.StatusAuthorized)
		}
	})
}

// A panic inside a transaction rolls it back and gives its connection back
// to the pool; a leaked one would keep its locks and make Close (shutdown)
// wait for ever.
func TestWithTxPanicRollsBackAndReleasesTheConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A pool of its own, closed by the test: a cleanup's Close would hang
	// on a leaked connection instead of failing.
	db, err := postgres.Open(ctx, postgrestest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	store := postgres.NewPaymentStore(db)
	p := seed(t, db, store)

	recovered := func() (r any) {
		defer func() { r = recover() }()
		_ = store.WithTx(ctx, func(tx payment.Tx) error {
			changed := *p
			changed.Status = payment.StatusAuthorized
			if err := tx.PaymentUpdateState(ctx, &changed); err != nil {
				t.Errorf("update: %v", err)
			}
			panic("boom")
		})
		return nil
	}()
	if recovered != "boom" {
		t.Fatalf("recovered %v, want the panic to reach the caller", recovered)
	}
	if n := db.Pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections still acquired after the panic, want 0", n)
	}
	got, err := store.PaymentGetByID(ctx, p.AccountID, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != payment.StatusProcessing {
		t.Fatalf("status = %s after the panic, want %s: the write must roll back", got.Status, payment.StatusProcessing)
	}
	closed := make(chan struct{})
	go func() {
		db.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("pool Close did not return within 30s")
	}
}
