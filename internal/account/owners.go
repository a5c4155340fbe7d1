package account

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/acmepay/payments/internal/provider"
)

// OwnersSummary is what a pass of RecordProviderAccounts did.
type OwnersSummary struct {
	Examined int `json:"examined"`
	Recorded int `json:"recorded"`
	// Shared: accounts whose key belongs to a provider account another
	// account already holds; left without one, and logged for an operator.
	Shared int `json:"shared"`
	// Unanswered: the provider refused the key or could not be asked;
	// the next pass asks again.
	Unanswered int `json:"unanswered"`
}

// RecordProviderAccounts asks the provider which account the key of each
// account registered before registration asked it belongs to, and records
// it, so that a key of the same provider account registered later is
// refused like any other. Each row is written only while it has none, so
// two passes at once, or a pass beside a registration, record it once; a
// pass cut short is resumed by the next. Without WithProviderAccounts it
// does nothing.
func (s *Service) RecordProviderAccounts(ctx context.Context, log *slog.Logger) (OwnersSummary, error) {
	var sum OwnersSummary
	if s.owners == nil {
		return sum, nil
	}
	for after := ""; ; {
		ids, err := s.store.AccountListIDsAfter(ctx, after, 100)
		if err != nil || len(ids) == 0 {
			return sum, err
		}
		for _, id := range ids {
			if err := s.recordProviderAccount(ctx, log, id, &sum); err != nil {
				return sum, fmt.Errorf("account %s: %w", id, err)
			}
		}
		after = ids[len(ids)-1]
	}
}

// recordProviderAccount asks and records the provider account of one
// account that has none.
func (s *Service) recordProviderAccount(ctx context.Context, log *slog.Logger, id string, sum *OwnersSummary) error {
	row, err := s.store.AccountGetByID(ctx, id)
	// An account without a Stripe secret (Mercado Pago alone) has no
	// Stripe account to ask about.
	if err != nil || row.StripeAccountID != "" || row.StripeSecretEnc == nil {
		return err
	}
	sum.Examined++
	a, err := s.open(row)
	if err != nil {
		return err
	}
	owner, err := s.owners.AccountID(ctx, provider.Credentials{SecretKey: a.StripeSecret})
	if err != nil || owner == "" {
		sum.Unanswered++
		log.WarnContext(ctx, "provider account not known: the provider refused the key or could not be asked",
			slog.String("account_id", id), slog.Bool("refused", errors.Is(err, provider.ErrCredentialsRefused)))
		return nil
	}
	recorded, err := s.store.AccountSetStripeAccountID(ctx, id, owner)
	switch {
	case errors.Is(err, ErrCredentialsInUse):
		sum.Shared++
		log.WarnContext(ctx, "two accounts hold keys of one provider account", slog.String("account_id", id))
		return nil
	case err != nil:
		return err
	case recorded:
		sum.Recorded++
	}
	return nil
}
