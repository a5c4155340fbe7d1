package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/app"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/postgres"
)

// openAccounts builds the account service and checks ENCRYPTION_KEY
// against the stored canary (see app.OpenAccounts); log nil keeps it quiet.
func openAccounts(ctx context.Context, db *postgres.DB, cfg config, log *slog.Logger) (*account.Service, error) {
	return app.OpenAccounts(ctx, db, cfg.appConfig(log))
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
