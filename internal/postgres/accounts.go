package postgres

import (
	"context"
	"time"

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

// AccountList returns every account, oldest first.
func (s *AccountStore) AccountList(ctx context.Context) ([]account.Row, error) {
	rs, err := s.db.q.AccountList(ctx)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]account.Row, len(rs))
	for i, r := range rs {
		out[i] = accountFromRow(r)
	}
	return out, nil
}

// AccountRotateAPIKey replaces an account's API key, keeping the current
// one as the previous key until previousExpiresAt.
func (s *AccountStore) AccountRotateAPIKey(ctx context.Context, id string, newHash []byte, previousExpiresAt, rotatedAt time.Time) (account.Row, error) {
	r, err := s.db.q.AccountRotateAPIKey(ctx, dbsqlc.AccountRotateAPIKeyParams{
		ID: id, ApiKeyHash: newHash, PreviousExpiresAt: &previousExpiresAt, RotatedAt: &rotatedAt,
	})
	return accountFromRow(r), translate(err)
}

func accountFromRow(r dbsqlc.Account) account.Row {
	row := account.Row{ID: r.ID, Name: r.Name, APIKeyHash: r.ApiKeyHash, StripeSecretEnc: r.StripeSecretEnc,
		StripeSecretHMAC: r.StripeSecretHmac, WebhookSecretEnc: r.WebhookSecretEnc, CreatedAt: r.CreatedAt,
		PreviousAPIKeyHash: r.PreviousApiKeyHash}
	if r.PreviousApiKeyExpiresAt != nil {
		row.PreviousAPIKeyExpiresAt = *r.PreviousApiKeyExpiresAt
	}
	if r.ApiKeyRotatedAt != nil {
		row.APIKeyRotatedAt = *r.ApiKeyRotatedAt
	}
	return row
}
