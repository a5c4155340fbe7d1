package postgres

import (
	"context"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/postgres/dbsqlc"
)

// AccountStore implements account.Store.
type AccountStore struct{ db *DB }

// NewAccountStore returns the account store on db.
func NewAccountStore(db *DB) *AccountStore { return &AccountStore{db: db} }

var _ account.Store = (*AccountStore)(nil)

// AccountInsert stores a new account.
func (s *AccountStore) AccountInsert(ctx context.Context, r account.Row) error {
	_, err := s.db.q.AccountInsert(ctx, dbsqlc.AccountInsertParams{
		ID: r.ID, Name: r.Name, ApiKeyHash: r.APIKeyHash, StripeSecretEnc: r.StripeSecretEnc,
		StripeSecretHmac: r.StripeSecretHMAC, WebhookSecretEnc: r.WebhookSecretEnc, CreatedAt: r.CreatedAt,
	})
	return translate(err)
}

// AccountByAPIKeyHash finds the account of an API key hash.
func (s *AccountStore) AccountByAPIKeyHash(ctx context.Context, hash []byte) (account.Row, error) {
	r, err := s.db.q.AccountGetByAPIKeyHash(ctx, hash)
	return accountFromRow(r), translate(err)
}

// AccountByID finds an account.
func (s *AccountStore) AccountByID(ctx context.Context, id string) (account.Row, error) {
	r, err := s.db.q.AccountGetByID(ctx, id)
	return accountFromRow(r), translate(err)
}

func accountFromRow(r dbsqlc.Account) account.Row {
	return account.Row{ID: r.ID, Name: r.Name, APIKeyHash: r.ApiKeyHash, StripeSecretEnc: r.StripeSecretEnc,
		StripeSecretHMAC: r.StripeSecretHmac, WebhookSecretEnc: r.WebhookSecretEnc, CreatedAt: r.CreatedAt}
}
