package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
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
		StripeAccountID:           nullIfEmpty(r.StripeAccountID),
		MercadopagoAccessTokenEnc: r.MercadoPagoTokenEnc, MercadopagoAccessTokenHmac: r.MercadoPagoTokenHMAC,
		MercadopagoWebhookSecretEnc: r.MercadoPagoWebhookSecretEnc, Providers: providerList(r.Providers),
	})
	return translate(err)
}

// AccountGetByAPIKeyHash finds the account of an API key hash.
func (s *AccountStore) AccountGetByAPIKeyHash(ctx context.Context, hash []byte) (account.Row, error) {
	r, err := s.db.q.AccountGetByAPIKeyHash(ctx, hash)
	return accountFromRow(r), translate(err)
}

// AccountGetByID finds an account.
func (s *AccountStore) AccountGetByID(ctx context.Context, id string) (account.Row, error) {
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

// AccountGetFirst returns the oldest-id account, or payment.ErrNotFound.
func (s *AccountStore) AccountGetFirst(ctx context.Context) (account.Row, error) {
	r, err := s.db.q.AccountGetFirst(ctx)
	return accountFromRow(r), translate(err)
}

// AccountListIDsAfter lists up to n account ids greater than after, in order.
func (s *AccountStore) AccountListIDsAfter(ctx context.Context, after string, n int) ([]string, error) {
	ids, err := s.db.q.AccountListIDsAfter(ctx, dbsqlc.AccountListIDsAfterParams{After: after, MaxRows: int32(n)})
	return ids, translate(err)
}

// AccountSetStripeAccountID records the provider account of an account
// that has none yet; false when it already had one.
func (s *AccountStore) AccountSetStripeAccountID(ctx context.Context, id, stripeAccountID string) (bool, error) {
	n, err := s.db.q.AccountSetStripeAccountID(ctx, dbsqlc.AccountSetStripeAccountIDParams{ID: id, StripeAccountID: &stripeAccountID})
	return n == 1, translate(err)
}

// AccountIDBySecretHMAC returns the id of the account holding a Stripe
// secret with this fingerprint, or "".
func (s *AccountStore) AccountIDBySecretHMAC(ctx context.Context, hmac []byte) (string, error) {
	ids, err := s.db.q.AccountIDBySecretHMAC(ctx, hmac)
	return first(ids), translate(err)
}

// AccountReseal locks the account's row and stores what reseal returns for
// its secrets, when it reports a change. The row lock makes concurrent
// re-encryptions take turns: the second sees the first one's result.
func (s *AccountStore) AccountReseal(ctx context.Context, id string, reseal func(account.Row) (account.Row, bool, error)) (bool, error) {
	changed := false
	err := withTx(ctx, s.db, func(tx pgx.Tx) error {
		q := s.db.q.WithTx(tx)
		r, err := q.AccountGetByIDForUpdate(ctx, id)
		if err != nil {
			return translate(err)
		}
		next, ok, err := reseal(accountFromRow(r))
		if err != nil || !ok {
			return err
		}
		changed = true
		return translate(q.AccountUpdateSecrets(ctx, dbsqlc.AccountUpdateSecretsParams{ID: id,
			StripeSecretEnc: next.StripeSecretEnc, StripeSecretHmac: next.StripeSecretHMAC, WebhookSecretEnc: next.WebhookSecretEnc,
			MercadopagoAccessTokenEnc: next.MercadoPagoTokenEnc, MercadopagoAccessTokenHmac: next.MercadoPagoTokenHMAC,
			MercadopagoWebhookSecretEnc: next.MercadoPagoWebhookSecretEnc}))
	})
	return changed, err
}

// AccountUpdateProviders locks the account's row and stores the provider
// credentials update returns; the row lock makes concurrent changes to one
// account's providers take turns.
func (s *AccountStore) AccountUpdateProviders(ctx context.Context, id string, update func(account.Row) (account.Row, error)) (account.Row, error) {
	var out account.Row
	err := withTx(ctx, s.db, func(tx pgx.Tx) error {
		q := s.db.q.WithTx(tx)
		r, err := q.AccountGetByIDForUpdate(ctx, id)
		if err != nil {
			return translate(err)
		}
		next, err := update(accountFromRow(r))
		if err != nil {
			return err
		}
		r, err = q.AccountUpdateProviders(ctx, dbsqlc.AccountUpdateProvidersParams{ID: id,
			StripeSecretEnc: next.StripeSecretEnc, StripeSecretHmac: next.StripeSecretHMAC, WebhookSecretEnc: next.WebhookSecretEnc,
			StripeAccountID:           nullIfEmpty(next.StripeAccountID),
			MercadopagoAccessTokenEnc: next.MercadoPagoTokenEnc, MercadopagoAccessTokenHmac: next.MercadoPagoTokenHMAC,
			MercadopagoWebhookSecretEnc: next.MercadoPagoWebhookSecretEnc, Providers: providerList(next.Providers)})
		out = accountFromRow(r)
		return translate(err)
	})
	return out, err
}

// AccountUpdateRouting locks the account's row and stores the routing
// update returns (JSON, or nil for none), so that it is checked against
// the providers stored beside it.
func (s *AccountStore) AccountUpdateRouting(ctx context.Context, id string, update func(account.Row) ([]byte, error)) (account.Row, error) {
	var out account.Row
	err := withTx(ctx, s.db, func(tx pgx.Tx) error {
		q := s.db.q.WithTx(tx)
		r, err := q.AccountGetByIDForUpdate(ctx, id)
		if err != nil {
			return translate(err)
		}
		routing, err := update(accountFromRow(r))
		if err != nil {
			return err
		}
		r, err = q.AccountUpdateRouting(ctx, dbsqlc.AccountUpdateRoutingParams{ID: id, Routing: routing})
		out = accountFromRow(r)
		return translate(err)
	})
	return out, err
}

// AccountIDByMercadoPagoHMAC returns the id of the account holding a
// Mercado Pago access token with this fingerprint, or "".
func (s *AccountStore) AccountIDByMercadoPagoHMAC(ctx context.Context, hmac []byte) (string, error) {
	ids, err := s.db.q.AccountIDByMercadoPagoHMAC(ctx, hmac)
	return first(ids), translate(err)
}

func first(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// EncryptionCanaryGet returns the sealed encryption canary, or payment.ErrNotFound.
func (s *AccountStore) EncryptionCanaryGet(ctx context.Context) ([]byte, error) {
	b, err := s.db.q.EncryptionCanaryGet(ctx)
	return b, translate(err)
}

// EncryptionCanaryInsert stores the canary unless one exists; concurrent first
// starts keep the first.
func (s *AccountStore) EncryptionCanaryInsert(ctx context.Context, sealed []byte, at time.Time) error {
	return translate(s.db.q.EncryptionCanaryInsert(ctx, dbsqlc.EncryptionCanaryInsertParams{Ciphertext: sealed, UpdatedAt: at}))
}

// CanaryReseal locks the canary and stores what reseal returns, when it
// reports a change.
func (s *AccountStore) CanaryReseal(ctx context.Context, at time.Time, reseal func([]byte) ([]byte, bool, error)) (bool, error) {
	changed := false
	err := withTx(ctx, s.db, func(tx pgx.Tx) error {
		q := s.db.q.WithTx(tx)
		b, err := q.EncryptionCanaryGetForUpdate(ctx)
		if errors.Is(err, pgx.ErrNoRows) {
			return payment.ErrNotFound
		}
		if err != nil {
			return translate(err)
		}
		next, ok, err := reseal(b)
		if err != nil || !ok {
			return err
		}
		changed = true
		return translate(q.EncryptionCanaryUpdate(ctx, dbsqlc.EncryptionCanaryUpdateParams{Ciphertext: next, UpdatedAt: at}))
	})
	return changed, err
}

func accountFromRow(r dbsqlc.Account) account.Row {
	row := account.Row{ID: r.ID, Name: r.Name, APIKeyHash: r.ApiKeyHash, StripeSecretEnc: r.StripeSecretEnc,
		StripeSecretHMAC: r.StripeSecretHmac, WebhookSecretEnc: r.WebhookSecretEnc, CreatedAt: r.CreatedAt,
		PreviousAPIKeyHash: r.PreviousApiKeyHash, MercadoPagoTokenEnc: r.MercadopagoAccessTokenEnc,
		MercadoPagoTokenHMAC: r.MercadopagoAccessTokenHmac, MercadoPagoWebhookSecretEnc: r.MercadopagoWebhookSecretEnc,
		Providers: r.Providers, Routing: r.Routing}
	if r.PreviousApiKeyExpiresAt != nil {
		row.PreviousAPIKeyExpiresAt = *r.PreviousApiKeyExpiresAt
	}
	if r.ApiKeyRotatedAt != nil {
		row.APIKeyRotatedAt = *r.ApiKeyRotatedAt
	}
	if r.StripeAccountID != nil {
		row.StripeAccountID = *r.StripeAccountID
	}
	return row
}

// providerList is ss, or an empty list for nil: providers is NOT NULL.
func providerList(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// nullIfEmpty is s, or NULL when it is empty.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
