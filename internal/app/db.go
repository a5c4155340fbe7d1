package app

import (
	"context"
	"fmt"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/stripe"
)

// OpenDB opens the service's pool on DatabaseURL, every session bounded by
// the DB* timeouts.
func OpenDB(ctx context.Context, cfg Config) (*postgres.DB, error) {
	return postgres.Open(ctx, cfg.DatabaseURL, cfg.dbOptions()...)
}

func (c Config) dbOptions() []postgres.Option {
	return append([]postgres.Option{postgres.WithSessionTimeouts(
		c.DBStatementTimeout, c.DBLockTimeout, c.DBIdleInTransactionTimeout), postgres.WithTracing(c.TracerProvider)}, c.DBOptions...)
}

// Migrate applies the migrations through MigrateDatabaseURL: db itself
// when it is DatabaseURL (or empty), a connection of its own otherwise.
func Migrate(ctx context.Context, cfg Config, db *postgres.DB) error {
	if cfg.MigrateDatabaseURL == "" || cfg.MigrateDatabaseURL == cfg.DatabaseURL {
		return postgres.Migrate(ctx, db)
	}
	mdb, err := postgres.Open(ctx, cfg.MigrateDatabaseURL, postgres.WithSessionTimeouts(
		cfg.DBStatementTimeout, cfg.DBLockTimeout, cfg.DBIdleInTransactionTimeout))
	if err != nil {
		return fmt.Errorf("MIGRATE_DATABASE_URL: %w", err)
	}
	defer mdb.Close()
	return postgres.Migrate(ctx, mdb)
}

// OpenAccounts builds the account service with both keys and checks them
// against the stored canary: a wrong encryption key stops here, with one
// line, before anything is served or written. A nil Logger is quiet.
func OpenAccounts(ctx context.Context, db *postgres.DB, cfg Config) (*account.Service, error) {
	accounts, err := account.NewService(postgres.NewAccountStore(db), cfg.EncryptionKey, cfg.Now,
		account.WithPreviousKey(cfg.EncryptionKeyPrevious),
		account.WithProviderAccounts(providerAccounts{
			stripe: stripe.New(stripe.Config{APIBase: cfg.StripeAPIBase,
				MaxNetworkRetries: cfg.ProviderRetries, Logger: cfg.Logger,
				KeyRetention: cfg.ProviderKeyRetention, SearchLag: cfg.ProviderSearchGrace}),
			timeout: cfg.ProviderTimeout}))
	if err != nil {
		return nil, err
	}
	rotating, err := accounts.CheckKey(ctx)
	if err != nil {
		return nil, err
	}
	if rotating && cfg.Logger != nil {
		cfg.Logger.Warn("stored secrets are still under ENCRYPTION_KEY_PREVIOUS: run `payments accounts reencrypt`, then unset it")
	}
	return accounts, nil
}

// providerAccounts asks Stripe which account a key belongs to, within
// PROVIDER_TIMEOUT.
type providerAccounts struct {
	stripe  *stripe.Provider
	timeout time.Duration
}

func (p providerAccounts) AccountID(ctx context.Context, c provider.Credentials) (string, error) {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	return p.stripe.AccountID(ctx, c)
}
