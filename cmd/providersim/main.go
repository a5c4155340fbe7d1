// Command providersim serves the Stripe- and Mercado Pago-compatible provider
// simulator for local runs and out-of-process tests. Point STRIPE_API_BASE
// (and MERCADOPAGO_API_BASE) at the address it prints; drive faults, revoke secret keys, move its clock past the key
// retention, pay or expire Pix and Boleto, answer 3-D Secure challenges,
// register webhook endpoints and read counters through its /_sim/ control API.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/acmepay/payments/internal/provider/providersim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "providersim:", err)
		os.Exit(1)
	}
}

func run() error {
	retention := 24 * time.Hour
	if v := os.Getenv("PROVIDERSIM_KEY_RETENTION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("PROVIDERSIM_KEY_RETENTION: want a positive duration such as 24h, got %q", v)
		}
		retention = d
	}
	addr := os.Getenv("PROVIDERSIM_ADDR")
	if addr == "" {
		addr = "127.0.0.1:12111"
	}
	flag.StringVar(&addr, "addr", addr, "listen address (env PROVIDERSIM_ADDR)")
	flag.DurationVar(&retention, "key-retention", retention, "how long idempotency keys are remembered (env PROVIDERSIM_KEY_RETENTION)")
	mpRetention, err := envDuration("PROVIDERSIM_MP_KEY_RETENTION", 24*time.Hour)
	if err != nil {
		return err
	}
	mpLag, err := envDuration("PROVIDERSIM_MP_SEARCH_LAG", 0)
	if err != nil {
		return err
	}
	lag, err := envDuration("PROVIDERSIM_SEARCH_LAG", 0)
	if err != nil {
		return err
	}
	flag.DurationVar(&lag, "search-lag", lag, "how old a Stripe PaymentIntent must be to be found by search (env PROVIDERSIM_SEARCH_LAG)")
	flag.DurationVar(&mpRetention, "mp-key-retention", mpRetention, "how long Mercado Pago X-Idempotency-Keys are remembered; 0: none (env PROVIDERSIM_MP_KEY_RETENTION)")
	flag.DurationVar(&mpLag, "mp-search-lag", mpLag, "how old a Mercado Pago payment must be to be found by search (env PROVIDERSIM_MP_SEARCH_LAG)")
	baseURL := os.Getenv("PROVIDERSIM_BASE_URL")
	flag.StringVar(&baseURL, "base-url", baseURL, "where browsers reach the hosted 3-D Secure, Pix and Boleto pages (env PROVIDERSIM_BASE_URL; default: the Host each request came to)")
	var stripeFront, mpFront string
	flag.StringVar(&stripeFront, "stripe-front", "", "also serve Stripe's API on this address, behind a front whose outage POST /_sim/outages sets (front \"stripe\")")
	flag.StringVar(&mpFront, "mp-front", "", "also serve Mercado Pago's API on this address, behind a front whose outage POST /_sim/outages sets (front \"mercadopago\")")
	flag.Parse()

	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	sim := providersim.New(providersim.Options{KeyRetention: retention, Logger: logger, BaseURL: baseURL,
		SearchLag: lag, MPSearchLag: mpLag})
	sim.SetMPKeyRetention(mpRetention) // 0 is a setting here, not the default

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("providersim listening on http://%s\n", ln.Addr())
	closeFronts, err := startFronts(sim, ln.Addr().String(), map[string]string{"stripe": stripeFront, "mercadopago": mpFront})
	defer closeFronts()
	if err != nil {
		return err
	}

	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	// Held requests would otherwise keep Shutdown waiting.
	sim.ClearFaults()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// startFronts puts each provider's API behind a front on its address
// (none when ""), for the outage control; the returned func closes them.
func startFronts(sim *providersim.Server, target string, addrs map[string]string) (func(), error) {
	var fronts []*providersim.Front
	closeAll := func() {
		for _, f := range fronts {
			f.Close()
		}
	}
	for name, addr := range addrs {
		if addr == "" {
			continue
		}
		f, err := providersim.NewFront(addr, target)
		if err != nil {
			return closeAll, fmt.Errorf("%s front: %w", name, err)
		}
		fronts = append(fronts, f)
		sim.AddFront(name, f)
		fmt.Printf("providersim %s front on %s\n", name, f.URL())
	}
	return closeAll, nil
}

// envDuration reads a non-negative duration from the environment.
func envDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: want a non-negative duration such as 24h, got %q", name, v)
	}
	return d, nil
}
