// Command chaos runs the reliability instrument (`make chaos`): the real
// payments and providersim binaries under provider faults, replica kills,
// revoked credentials, expiring provider keys and late webhooks, driven by
// a fleet of checkout clients; then it reconciles and checks that nothing
// was charged twice, lost, misreported or left in doubt. It prints one line per figure and PASS or FAIL, and exits 1 on any
// violation. See docs/RELIABILITY.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/acmepay/payments/internal/chaos"
)

func main() { os.Exit(run()) }

// run returns the exit code: 0 pass, 1 violations, 2 a run that could not
// be carried out. Its deferred stops (the formation) run before the exit.
func run() int {
	var cfg chaos.Config
	flag.DurationVar(&cfg.Duration, "duration", 3*time.Minute, "how long the clients run (30s with -short unless set)")
	flag.IntVar(&cfg.Replicas, "replicas", 3, "payments serve replicas on the one database")
	flag.IntVar(&cfg.Clients, "clients", 0, "concurrent checkout clients (default 8; 6 with -short)")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of the clients, kills, webhooks and provider faults (0: random)")
	flag.BoolVar(&cfg.Short, "short", false, "a ~30 s run")
	flag.DurationVar(&cfg.KillEvery, "kill-every", 0, "mean time between replica SIGKILLs (default 6s; 4s with -short)")
	flag.DurationVar(&cfg.RevokeEvery, "revoke-every", 0, "mean time between revocations of the account's secret key (default 10s; 8s with -short)")
	flag.DurationVar(&cfg.KeyWindow, "key-window", 0, "re-send window left by the shared provider key retention (default 4s)")
	flag.BoolVar(&cfg.MPRetained, "mp-retained", false, "keep Mercado Pago keys as long as Stripe's at the replicas and the simulator (a re-send window of -key-window), instead of MERCADOPAGO_KEY_RETENTION=0s")
	flag.BoolVar(&cfg.NoDBFaults, "no-db-faults", false, "no fault proxy between the replicas and PostgreSQL (by default it loses COMMIT answers, resets, stalls and slows connections)")
	flag.BoolVar(&cfg.RestartPostgres, "restart-pg", false, "restart the run's private PostgreSQL cluster once during the run")
	flag.BoolVar(&cfg.SharedPostgres, "shared-pg", false, "run on the shared PostgreSQL server (TEST_DATABASE_URL or scripts/pg.sh url), not a private cluster started just below an xid8 boundary")
	flag.BoolVar(&cfg.Keep, "keep", false, "keep the database, binaries and logs")
	failover := flag.Bool("failover", false, "run on a pg_auto_failover formation (scripts/topology.sh) and fail its primary over once, mid-run (2 replicas unless -replicas)")
	flag.StringVar(&cfg.LogLevel, "log-level", "info", "LOG_LEVEL of the replicas")
	flag.Parse()
	if cfg.Short {
		durationSet := false
		flag.Visit(func(f *flag.Flag) { durationSet = durationSet || f.Name == "duration" })
		if !durationSet {
			cfg.Duration = 0 // the short default
		}
	}
	cfg.Out = os.Stdout

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *failover {
		replicasSet := false
		flag.Visit(func(f *flag.Flag) { replicasSet = replicasSet || f.Name == "replicas" })
		if !replicasSet {
			cfg.Replicas = 2
		}
		fmt.Println("chaos: starting a pg_auto_failover formation (scripts/topology.sh formation)")
		f, err := chaos.StartFormation(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 2
		}
		defer f.Stop()
		cfg.Server, cfg.Failover = f.URL, f.Failover
	}
	rep, err := chaos.Run(ctx, cfg)
	if rep != nil && err == nil {
		rep.Print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	if rep.Violations() > 0 {
		return 1
	}
	return 0
}
