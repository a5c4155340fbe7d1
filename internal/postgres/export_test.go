package postgres

import (
	"context"

	"github.com/acmepay/payments/internal/payment"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RawTx is the transaction under a payment.Tx begun by PaymentStore.WithTx,
// for tests that inspect its session.
func RawTx(tx payment.Tx) pgx.Tx { return tx.(*paymentTx).tx }

// MigrationDB opens the connections Migrate runs on.
var MigrationDB = migrationDB

// Querier is what the stores run statements outside a transaction on.
type Querier interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

// Outside is how db runs a statement outside a transaction.
func Outside(db *DB) Querier { return db.bounded }
