// Package app is the composition root: it builds the service's object
// graph once, from typed settings, for `payments` and for the test harness
// alike. What tests change (clock, provider, store, database options) are
// fields of Config, never a second graph.
package app

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/acmepay/payments/api"
	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/authlimit"
	"github.com/acmepay/payments/internal/console"
	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/metrics"
	"github.com/acmepay/payments/internal/notify"
	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/mercadopago"
	"github.com/acmepay/payments/internal/provider/stripe"
	"github.com/acmepay/payments/internal/reconcile"
	"github.com/acmepay/payments/internal/retention"
	"github.com/acmepay/payments/internal/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// Config is every setting of the service, and the seams tests use. A zero
// duration takes the default of the component it configures.
type Config struct {
	DatabaseURL string
	// MigrateDatabaseURL is a direct, session-capable URL for migrations
	// and the delivery queue; DatabaseURL when empty.
	MigrateDatabaseURL  string
	WebhookAllowPrivate bool
	// AdminToken enables the admin API and the console.
	AdminToken string
	// MetricsElsewhere leaves /metrics out of Handler: METRICS_ADDR serves
	// MetricsHandler instead.
	MetricsElsewhere bool
	TrustedProxies   []netip.Prefix
	StripeAPIBase    string
	// ProviderRetries is how often the Stripe client re-sends a failed
	// request itself (DefaultProviderRetries in production).
	ProviderRetries       int
	EncryptionKey         []byte
	EncryptionKeyPrevious []byte

	ProviderTimeout time.Duration
	InProgressLease time.Duration
	// CreateBudget (HTTP_WRITE_TIMEOUT) bounds a create's failovers;
	// CircuitFailures and CircuitCooldown set each provider's circuit.
	CreateBudget         time.Duration
	CircuitFailures      int
	CircuitCooldown      time.Duration
	ProviderKeyRetention time.Duration
	ProviderSearchGrace  time.Duration
	// MercadoPagoKeyRetention and MercadoPagoSearchGrace make Mercado
	// Pago's profile (provider.MercadoPagoProfile) once its adapter is
	// wired. A zero retention is the default (keys only looked up on
	// recovery); a zero grace takes provider.DefaultSearchLag.
	MercadoPagoKeyRetention time.Duration
	MercadoPagoSearchGrace  time.Duration
	// MercadoPagoAPIBase is MERCADOPAGO_API_BASE; "" is Mercado Pago's
	// own API.
	MercadoPagoAPIBase  string
	ReconcileInterval   time.Duration
	ReconcileAfter      time.Duration
	ReconcileMaxBackoff time.Duration
	ReconcileAlertAfter time.Duration
	// ReconcileRate paces the reconciler's claims per second; 0: no limit.
	ReconcileRate float64
	// ResponseTTL, TombstoneTTL and PurgeInterval: the retention windows
	// of idempotency keys; zero takes the Default* below.
	ResponseTTL   time.Duration
	TombstoneTTL  time.Duration
	PurgeInterval time.Duration
	AuditInterval time.Duration
	AuditWindow   time.Duration
	// AuditRate caps the audit's provider calls per second; 0: no cap.
	AuditRate float64
	// Session timeouts of every database session; zero leaves the
	// server's setting.
	DBStatementTimeout         time.Duration
	DBLockTimeout              time.Duration
	DBIdleInTransactionTimeout time.Duration

	// Logger receives every log; discarded when nil.
	Logger *slog.Logger
	// Now is the clock of every component; time.Now when nil.
	Now func() time.Time
	// NewID makes payment ids; payment.NewID when nil.
	NewID func(prefix string) string
	// WrapProvider, when set, wraps every provider adapter, each under its
	// name (payment.ProviderStripe, payment.ProviderMercadoPago).
	WrapProvider func(name string, p provider.Provider) provider.Provider
	// WrapStore, when set, wraps the payment service's store (only its).
	WrapStore func(payment.Store) payment.Store
	// DBOptions are added to the service's pool (a statement counter).
	DBOptions []postgres.Option
	// SkipMigrations: the database is known to be migrated (a test's).
	SkipMigrations bool
	// TracerProvider, when set (OTEL_* settings, or a test's in-memory
	// exporter), traces requests, transactions, provider calls and
	// webhook deliveries; nil: nothing is traced.
	TracerProvider trace.TracerProvider
}

// Defaults of the settings no component defaults itself.
const (
	DefaultProviderRetries = 2
	DefaultResponseTTL     = 72 * time.Hour
	DefaultTombstoneTTL    = 9600 * time.Hour
	DefaultPurgeInterval   = time.Hour
	DefaultAuditInterval   = time.Hour
	// deliveryWorkers is how many webhook deliveries run at once.
	deliveryWorkers = 10
)

// App is the wired service. Its fields are for commands and tests; they
// must not be replaced.
type App struct {
	DB         *postgres.DB
	Metrics    *metrics.Metrics
	Payments   *payment.Service
	Accounts   *account.Service
	Operations *operations.Service
	Webhooks   *notify.Service
	// Inbound takes the provider's events.
	Inbound *inbound.Service
	// WebhookWorker delivers webhooks; Start runs it in a River client.
	WebhookWorker *notify.Worker
	Reconciler    *reconcile.Reconciler
	Purger        *retention.Purger

	cfg     Config
	log     *slog.Logger
	handler http.Handler

	mu             sync.Mutex
	stopWorkers    context.CancelFunc
	workers        sync.WaitGroup
	stopDeliveries func()
}

func (c Config) check() error {
	if c.DatabaseURL == "" {
		return errors.New("app: a database URL is required")
	}
	if len(c.EncryptionKey) != 32 {
		return errors.New("app: the encryption key must be 32 bytes")
	}
	if c.AuditRate < 0 || c.ReconcileRate < 0 || c.ProviderRetries < 0 {
		return errors.New("app: the audit rate, the reconcile rate and provider retries must not be negative")
	}
	return nil
}

// New opens the database, applies the migrations and builds everything;
// nothing runs until Start. Close releases what New opened.
func New(ctx context.Context, cfg Config) (*App, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.MigrateDatabaseURL == "" {
		cfg.MigrateDatabaseURL = cfg.DatabaseURL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	db, err := OpenDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a := &App{DB: db, cfg: cfg, log: cfg.Logger}
	if err := a.build(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return a, nil
}

// build wires the services on a.DB.
func (a *App) build(ctx context.Context) (err error) {
	cfg, log := a.cfg, a.log
	if !cfg.SkipMigrations {
		if err := Migrate(ctx, cfg, a.DB); err != nil {
			return err
		}
	}
	if cfg.InProgressLease > 0 && cfg.InProgressLease <= cfg.ProviderTimeout {
		// Still safe: a retry taking over while the holder calls re-sends the
		// same provider key, which the provider answers once. But it turns
		// slow calls into needless unknowns.
		log.Warn("IN_PROGRESS_LEASE is not longer than PROVIDER_TIMEOUT; retries may take over calls still in flight",
			slog.Duration("lease", cfg.InProgressLease), slog.Duration("provider_timeout", cfg.ProviderTimeout))
	}
	store := postgres.NewPaymentStore(a.DB)
	hooks := postgres.NewWebhookStore(a.DB)
	a.Metrics = metrics.New(store.CountByStatus, func(ctx context.Context) (int64, time.Duration, error) {
		return store.EventBacklog(ctx, cfg.Now())
	}, store.ServerFeedLag)
	a.Metrics.Registry.MustRegister(a.DB.Collector())
	provs, err := newProviders(cfg)
	if err != nil {
		return err
	}
	pstore := wrapStore(cfg, store)
	if a.Payments, err = newPayments(cfg, provs, pstore, a.Metrics); err != nil {
		return err
	}
	if a.Inbound, err = inbound.New(inbound.Config{Payments: a.Payments, Store: pstore, Parse: stripe.ParseEvent,
		Now: payment.NewClock(cfg.Now)}); err != nil {
		return err
	}
	if a.Accounts, err = OpenAccounts(ctx, a.DB, cfg); err != nil {
		return err
	}
	if a.Reconciler, err = reconcile.New(reconcile.Config{Payments: a.Payments, Store: store, Now: payment.NewClock(cfg.Now), Accounts: a.Accounts, Logger: log,
		Metrics: a.Metrics, After: cfg.ReconcileAfter, Interval: cfg.ReconcileInterval,
		MaxBackoff: cfg.ReconcileMaxBackoff, AlertAfter: cfg.ReconcileAlertAfter, Rate: cfg.ReconcileRate,
		Tracer: cfg.TracerProvider}); err != nil {
		return err
	}
	if a.Operations, err = newOperations(cfg, a.Payments, provs, store, a.Accounts, a.Reconciler); err != nil {
		return err
	}
	a.Metrics.CountOpenDiscrepancies(a.Operations.CountOpenDiscrepancies)
	a.Metrics.WatchWebhookDeliveries(func(ctx context.Context) (metrics.WebhookDeliveryState, error) {
		return hooks.DeliveryState(ctx, cfg.Now())
	})
	guard := notify.Guard{AllowPrivate: cfg.WebhookAllowPrivate}
	if a.Webhooks, err = notify.NewService(hooks, a.Accounts, guard, cfg.Now); err != nil {
		return err
	}
	if a.WebhookWorker, err = notify.NewWorker(hooks, a.Accounts, guard, cfg.Now); err != nil {
		return err
	}
	a.WebhookWorker.Metrics, a.WebhookWorker.Log = a.Metrics, log
	if a.Purger, err = retention.New(retention.Config{Store: postgres.NewRetentionStore(a.DB), Logger: log, Now: cfg.Now,
		ResponseTTL: or(cfg.ResponseTTL, DefaultResponseTTL), TombstoneTTL: or(cfg.TombstoneTTL, DefaultTombstoneTTL),
		Interval: or(cfg.PurgeInterval, DefaultPurgeInterval)}); err != nil {
		return err
	}
	return a.buildAPI()
}

// wrapStore is the store of the money path and of provider events,
// wrapped when a seam asks.
func wrapStore(cfg Config, store *postgres.PaymentStore) payment.Store {
	if cfg.WrapStore != nil {
		return cfg.WrapStore(store)
	}
	return store
}

// newProviders builds every provider adapter by name, each wrapped when a
// seam asks.
func newProviders(cfg Config) (map[string]provider.Provider, error) {
	// With tracing on, each provider request is a span passed on to the
	// provider in traceparent; off, the adapters keep their own clients.
	var stripeClient, mpClient *http.Client
	if tp := cfg.TracerProvider; tp != nil {
		stripeClient = &http.Client{Timeout: 80 * time.Second, Transport: telemetry.Transport(tp, nil)}
		mpClient = &http.Client{Transport: telemetry.Transport(tp, http.DefaultTransport.(*http.Transport).Clone())}
	}
	mp, err := mercadopago.New(mercadopago.Config{APIBase: cfg.MercadoPagoAPIBase, Logger: cfg.Logger, Now: cfg.Now, HTTPClient: mpClient,
		KeyRetention: cfg.MercadoPagoKeyRetention, SearchLag: cfg.MercadoPagoSearchGrace, Clock: provider.NewClock(cfg.Now)})
	if err != nil {
		return nil, err
	}
	provs := map[string]provider.Provider{
		payment.ProviderStripe: stripe.New(stripe.Config{APIBase: cfg.StripeAPIBase, HTTPClient: stripeClient,
			MaxNetworkRetries: cfg.ProviderRetries, Logger: cfg.Logger,
			KeyRetention: cfg.ProviderKeyRetention, SearchLag: cfg.ProviderSearchGrace, Now: cfg.Now}),
		payment.ProviderMercadoPago: mp,
	}
	if cfg.WrapProvider != nil {
		for name, p := range provs {
			provs[name] = cfg.WrapProvider(name, p)
		}
	}
	return provs, nil
}

// newPayments builds the money path on the providers and store.
func newPayments(cfg Config, provs map[string]provider.Provider, pstore payment.Store, m *metrics.Metrics) (*payment.Service, error) {
	return payment.NewService(payment.Config{
		Store: pstore, Providers: provs, Logger: cfg.Logger, Metrics: m, Now: cfg.Now, NewID: cfg.NewID,
		ProviderTimeout: cfg.ProviderTimeout, Lease: cfg.InProgressLease,
		CreateBudget: cfg.CreateBudget, CircuitFailures: cfg.CircuitFailures, CircuitCooldown: cfg.CircuitCooldown,
		Tracer: cfg.TracerProvider,
	})
}

// newOperations builds the operators' service beside the money path.
func newOperations(cfg Config, payments *payment.Service, provs map[string]provider.Provider, store *postgres.PaymentStore, accounts payment.Accounts,
	rec *reconcile.Reconciler) (*operations.Service, error) {
	return operations.New(operations.Config{Payments: payments, Store: store, Providers: provs, Accounts: accounts,
		Logger: cfg.Logger, Now: payment.NewClock(cfg.Now), NewID: cfg.NewID, Reconcile: rec.All,
		ProviderTimeout: cfg.ProviderTimeout, Lease: cfg.InProgressLease, AlertAfter: cfg.ReconcileAlertAfter,
		AuditWindow: cfg.AuditWindow, AuditRate: cfg.AuditRate})
}

// buildAPI wires the HTTP API and, with an admin token, the console: one
// count of failed admin authentications serves both doors.
func (a *App) buildAPI() error {
	cfg := a.cfg
	limiter := authlimit.New(authlimit.Config{TrustedProxies: cfg.TrustedProxies, Now: cfg.Now})
	var con http.Handler
	if cfg.AdminToken != "" {
		c, err := console.New(console.Config{Payments: a.Payments, Accounts: a.Accounts, Operations: a.Operations,
			Store: postgres.NewConsoleStore(a.DB), Logger: a.log, AdminToken: cfg.AdminToken, AuthLimiter: limiter,
			Reconciler: a.Reconciler, Now: cfg.Now})
		if err != nil {
			return err
		}
		con = c.Handler()
	}
	srv, err := api.New(api.Config{Payments: a.Payments, Reconciler: a.Reconciler, Accounts: a.Accounts, Ready: a.DB, Metrics: a.Metrics,
		Logger: a.log, AdminToken: cfg.AdminToken, AuthLimiter: limiter, NoMetrics: cfg.MetricsElsewhere,
		Console: con, Operations: a.Operations, Webhooks: a.Webhooks, Inbound: a.Inbound, Tracer: cfg.TracerProvider})
	if err != nil {
		return err
	}
	a.handler = srv.Handler()
	return nil
}

// Handler is the HTTP API (and console).
func (a *App) Handler() http.Handler { return a.handler }

// MetricsHandler serves /metrics alone, for METRICS_ADDR.
func (a *App) MetricsHandler() http.Handler { return api.MetricsHandler(a.Metrics) }

// Close closes the database; Stop the workers first.
func (a *App) Close() { a.DB.Close() }

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
