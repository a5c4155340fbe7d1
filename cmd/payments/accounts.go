package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/payment"
)

// accountsCommand runs `payments accounts <command>`. Flags are checked
// before any setting is read, so a mistake is named first.
func accountsCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, groupUsage("accounts"))
		return usageErrorf("accounts: a command is required")
	}
	var runIt func(*account.Service) error
	switch args[0] {
	case "create":
		var err error
		if runIt, err = accountsCreate(ctx, args[1:], stdout); err != nil {
			return err
		}
	case "list":
		var err error
		if runIt, err = accountsList(ctx, args[1:], stdout); err != nil {
			return err
		}
	case "routing":
		var err error
		if runIt, err = accountsRouting(ctx, args[1:], stdout); err != nil {
			return err
		}
	case "rotate-api-key":
		fs := flag.NewFlagSet("accounts rotate-api-key", flag.ContinueOnError)
		id := fs.String("account", "", "the account's id (acct_…)")
		grace := fs.Duration("grace", account.DefaultRotationGrace, "how long the old key stays valid")
		if err := parseFlags(fs, args[1:], "account"); err != nil {
			return err
		}
		if *grace < 0 {
			return usageErrorf("accounts rotate-api-key: --grace must not be negative, not %s", *grace)
		}
		runIt = func(s *account.Service) error {
			apiKey, until, err := s.RotateAPIKey(ctx, *id, *grace)
			if err != nil {
				return fmt.Errorf("accounts rotate-api-key: %s: %w", *id, err)
			}
			return json.NewEncoder(stdout).Encode(struct {
				ID         string    `json:"id"`
				APIKey     string    `json:"api_key"`
				ValidUntil time.Time `json:"previous_api_key_valid_until"`
			}{*id, apiKey, until.UTC()})
		}
	case "reencrypt":
		fs := flag.NewFlagSet("accounts reencrypt", flag.ContinueOnError)
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		cfg, err := loadConfig(getenv)
		if err != nil {
			return err
		}
		return accountsReencrypt(ctx, cfg, stdout, stderr)
	default:
		fmt.Fprint(stderr, groupUsage("accounts"))
		return usageErrorf("unknown command %q", "accounts "+args[0])
	}

	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := migrate(ctx, cfg, db); err != nil {
		return err
	}
	s, err := openAccounts(ctx, db, cfg, nil)
	if err != nil {
		return err
	}
	return runIt(s)
}

// accountsCreate parses `accounts create` and returns what creates the
// account once the service is open.
func accountsCreate(ctx context.Context, args []string, stdout io.Writer) (func(*account.Service) error, error) {
	fs := flag.NewFlagSet("accounts create", flag.ContinueOnError)
	name := fs.String("name", "", "account name")
	key := fs.String("stripe-key", "", "the account's Stripe secret key (sk_…)")
	whsec := fs.String("webhook-secret", "", "the account's Stripe webhook signing secret (whsec_…)")
	mpToken := fs.String("mercadopago-access-token", "", "the account's Mercado Pago access token (APP_USR-… or TEST-…)")
	mpSecret := fs.String("mercadopago-webhook-secret", "", "the account's Mercado Pago webhook secret")
	// Stripe's key is required unless Mercado Pago's credentials stand in.
	err := parseFlagsRequiring(fs, args, func() []string {
		if *mpToken != "" {
			return []string{"name"}
		}
		return []string{"name", "stripe-key"}
	})
	if err != nil {
		return nil, err
	}
	sec := account.Secrets{StripeSecret: *key, WebhookSecret: *whsec, MercadoPagoToken: *mpToken, MercadoPagoWebhookSecret: *mpSecret}
	if err := checkCredentialFlags(sec); err != nil {
		return nil, err
	}
	return func(s *account.Service) error {
		a, apiKey, err := s.CreateWith(ctx, *name, sec)
		if err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(map[string]string{"id": a.ID, "api_key": apiKey})
	}, nil
}

// accountsList parses `accounts list` and returns what prints the
// accounts, one JSON object a line, once the service is open.
func accountsList(ctx context.Context, args []string, stdout io.Writer) (func(*account.Service) error, error) {
	fs := flag.NewFlagSet("accounts list", flag.ContinueOnError)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	return func(s *account.Service) error {
		list, err := s.List(ctx)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		for _, a := range list {
			if err := enc.Encode(a); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// accountsRouting parses `accounts routing` and returns what sets the
// account's routing from --file, or prints it without, once the service
// is open. The file is read and decoded before anything is opened.
func accountsRouting(ctx context.Context, args []string, stdout io.Writer) (func(*account.Service) error, error) {
	fs := flag.NewFlagSet("accounts routing", flag.ContinueOnError)
	id := fs.String("account", "", "the account's id (acct_…)")
	file := fs.String("file", "", "a JSON file with the routing to set: {\"rules\":[…],\"default\":[…]}")
	if err := parseFlags(fs, args, "account"); err != nil {
		return nil, err
	}
	if *file == "" {
		return func(s *account.Service) error {
			rt, err := s.Routing(ctx, *id)
			if err != nil {
				return fmt.Errorf("accounts routing: %s: %w", *id, err)
			}
			return json.NewEncoder(stdout).Encode(rt)
		}, nil
	}
	body, err := os.ReadFile(*file)
	if err != nil {
		return nil, usageErrorf("accounts routing: --file: %v", err)
	}
	b, err := payment.DecodeRouting(body)
	if err != nil {
		return nil, usageErrorf("accounts routing: --file %s: %v", *file, describe(err))
	}
	return func(s *account.Service) error {
		rt, err := s.SetRouting(ctx, *id, b)
		if err != nil {
			return fmt.Errorf("accounts routing: %s: %w", *id, describe(err))
		}
		return json.NewEncoder(stdout).Encode(rt)
	}, nil
}

// describe spells out a domain error's field problems, which its message
// alone does not name.
func describe(err error) error {
	var pe *payment.Error
	if !errors.As(err, &pe) || len(pe.Fields) == 0 {
		return err
	}
	parts := make([]string, 0, len(pe.Fields))
	for _, f := range pe.Fields {
		parts = append(parts, f.Field+" "+f.Message)
	}
	return fmt.Errorf("%s: %s: %w", pe.Message, strings.Join(parts, "; "), err)
}

// checkCredentialFlags names the flag of a malformed provider secret, so
// an operator sees which one to fix; the secret itself is never printed.
func checkCredentialFlags(sec account.Secrets) error {
	if sec.StripeSecret != "" || sec.WebhookSecret != "" || sec.MercadoPagoToken == "" {
		if err := account.CheckStripeSecretKey(sec.StripeSecret); err != nil {
			return usageErrorf("--stripe-key %v", err)
		}
	}
	if sec.WebhookSecret != "" {
		if err := account.CheckWebhookSecret(sec.WebhookSecret); err != nil {
			return usageErrorf("--webhook-secret %v", err)
		}
	}
	if sec.MercadoPagoToken != "" || sec.MercadoPagoWebhookSecret != "" {
		if err := account.CheckMercadoPagoAccessToken(sec.MercadoPagoToken); err != nil {
			return usageErrorf("--mercadopago-access-token %v", err)
		}
	}
	if sec.MercadoPagoWebhookSecret != "" {
		if err := account.CheckMercadoPagoWebhookSecret(sec.MercadoPagoWebhookSecret); err != nil {
			return usageErrorf("--mercadopago-webhook-secret %v", err)
		}
	}
	return nil
}
