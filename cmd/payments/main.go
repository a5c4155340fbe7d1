// Command payments is the payment orchestration service: the HTTP API with
// its background workers (serve), schema migrations (migrate) and account
// administration (accounts create).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/acmepay/payments/api"
	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/metrics"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/provider/stripe"
)

const usage = `usage: payments <command>

commands:
  serve                     run the HTTP API and the background workers
  migrate                   apply database migrations
  accounts create --name N --stripe-key K [--webhook-secret S]
                            create an account; prints {"id":…,"api_key":…}
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "payments:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a command is required")
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := logging.New(stderr, cfg.LogLevel)
	switch args[0] {
	case "serve":
		return serve(ctx, cfg, log, nil)
	case "migrate":
		db, err := postgres.Open(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := postgres.Migrate(ctx, db); err != nil {
			return err
		}
		log.Info("migrations applied")
		return nil
	case "accounts":
		return accountsCommand(ctx, cfg, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func accountsCommand(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprint(stderr, usage)
		return errors.New("usage: payments accounts create --name N --stripe-key K [--webhook-secret S]")
	}
	fs := flag.NewFlagSet("accounts create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "account name")
	key := fs.String("stripe-key", "", "the account's Stripe secret key (sk_…)")
	whsec := fs.String("webhook-secret", "", "the account's Stripe webhook signing secret (whsec_…)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := postgres.Migrate(ctx, db); err != nil {
		return err
	}
	accounts, err := account.NewService(postgres.NewAccountStore(db), cfg.EncryptionKey, nil)
	if err != nil {
		return err
	}
	a, apiKey, err := accounts.Create(ctx, *name, *key, *whsec)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]string{"id": a.ID, "api_key": apiKey})
}

// serve runs until ctx is canceled (SIGTERM), then drains in-flight
// requests. ready, when set, receives the bound address.
func serve(ctx context.Context, cfg config, log *slog.Logger, ready chan<- string) error {
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := postgres.Migrate(ctx, db); err != nil {
		return err
	}
	store := postgres.NewPaymentStore(db)
	m := metrics.New(store.CountByStatus)
	payments, err := payment.NewService(payment.Config{
		Store:    store,
		Provider: stripe.New(stripe.Config{APIBase: cfg.StripeAPIBase, MaxNetworkRetries: 2, Logger: log}),
		Logger:   log, Metrics: m,
		ProviderTimeout: cfg.ProviderTimeout, Lease: cfg.InProgressLease,
		KeyRetention: cfg.ProviderKeyRetention, SearchGrace: cfg.ProviderSearchGrace,
	})
	if err != nil {
		return err
	}
	accounts, err := account.NewService(postgres.NewAccountStore(db), cfg.EncryptionKey, nil)
	if err != nil {
		return err
	}
	srv, err := api.New(api.Config{Payments: payments, Accounts: accounts, Ready: db, Metrics: m,
		Logger: log, AdminToken: cfg.AdminToken})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("listening", slog.String("addr", ln.Addr().String()))
	if ready != nil {
		ready <- ln.Addr().String()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("draining in-flight requests")
	// In-flight provider calls finish and record their outcome: a request
	// cut short here would leave its payment unknown.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ProviderTimeout+5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}
