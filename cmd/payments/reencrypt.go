package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/stripe"
)

// openAccounts builds the account service with both keys and checks them
// against the stored canary: a wrong ENCRYPTION_KEY stops here, with one
// line, before anything is served or written.
func openAccounts(ctx context.Context, db *postgres.DB, cfg config, log *slog.Logger) (*account.Service, error) {
	accounts, err := account.NewService(postgres.NewAccountStore(db), cfg.EncryptionKey, nil,
		account.WithPreviousKey(cfg.EncryptionKeyPrevious),
		account.WithProviderAccounts(providerAccounts{
			stripe:  stripe.New(stripe.Config{APIBase: cfg.StripeAPIBase, MaxNetworkRetries: 2, Logger: log}),
			timeout: cfg.ProviderTimeout}))
	if err != nil {
		return nil, err
	}
	rotating, err := accounts.CheckKey(ctx)
	if err != nil {
		return nil, err
	}
	if rotating && log != nil {
		log.Warn("stored secrets are still under ENCRYPTION_KEY_PREVIOUS: run `payments accounts reencrypt`, then unset it")
	}
	return accounts, nil
}

// accountsReencrypt moves every stored secret to ENCRYPTION_KEY and prints
// a JSON summary. Safe to run again, or on two machines at once.
func accountsReencrypt(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	log := logging.New(stderr, cfg.LogLevel)
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := migrate(ctx, cfg, db); err != nil {
		return err
	}
	accounts, err := openAccounts(ctx, db, cfg, nil)
	if err != nil {
		return err
	}
	sum, err := accounts.Reencrypt(ctx, log)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(sum)
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
