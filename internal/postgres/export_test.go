package postgres

import (
	"github.com/acmepay/payments/internal/payment"
	"github.com/jackc/pgx/v5"
)

// RawTx is the transaction under a payment.Tx begun by PaymentStore.WithTx,
// for tests that inspect its session.
func RawTx(tx payment.Tx) pgx.Tx { return tx.(*paymentTx).tx }

// MigrationDB opens the connections Migrate runs on.
var MigrationDB = migrationDB
