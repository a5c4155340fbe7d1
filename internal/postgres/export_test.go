package postgres

import (
	"context"

	"github.com/acmepay/payments/internal/payment"
)

// Show reads a setting inside a transaction begun by PaymentStore.WithTx.
func Show(ctx context.Context, tx payment.Tx, setting string) (string, error) {
	var v string
	err := tx.(*paymentTx).tx.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&v)
	return v, err
}
