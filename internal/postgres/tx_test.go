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
		err := store.WithTx(ctx, func(tx payment.Tx) (err error) {
			got, err = postgres.Show(ctx, tx, "transaction_isolation")
			return err
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
			if _, err := tx.AttemptGet(ctx, "att_none"); !errors.Is(err, payment.ErrNotFound) {
				return fmt.Errorf("first read: %w", err)
			}
			// Another transaction, say a webhook, records the outcome.
			if _, err := b.admin.Exec(ctx, `UPDATE payments SET status = 'authorized' WHERE id = $1`, b.payment.ID); err != nil {
				return err
			}
			locked, err = tx.PaymentLock(ctx, b.payment.AccountID, b.payment.ID)
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
