package payment

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/sony/gobreaker/v2"

	"github.com/acmepay/payments/internal/provider"
	"go.opentelemetry.io/otel/trace"
)

// Accounts resolves an account's provider credentials for background work
// (reconciler, operations), where no API key authenticated a caller.
type Accounts interface {
	Merchant(ctx context.Context, accountID string) (Account, error)
}

// Account is the caller: its id scopes every read and write, its
// credentials select the provider account.
type Account struct {
	ID string
	// Credentials are the account's at Stripe.
	Credentials provider.Credentials
	// Providers names the providers the account has credentials for, in
	// the order they were added: until routing, the first takes its
	// payments. Empty means Stripe alone (Credentials).
	Providers []string
	// ProviderCredentials are the account's credentials by provider name,
	// Stripe's included when Providers is set.
	ProviderCredentials map[string]provider.Credentials
	// Routing chooses the providers of each create (Route); nil means the
	// providers in the order added.
	Routing *Routing
}

// Provider names.
const (
	ProviderStripe      = "stripe"
	ProviderMercadoPago = "mercadopago"
)

// ProviderOf names a stored provider: "" (rows and values from before
// payments could run elsewhere) is Stripe.
func ProviderOf(name string) string {
	if name == "" {
		return ProviderStripe
	}
	return name
}

// CredentialsFor returns the account's credentials at a provider; false
// when it has none there.
func (a Account) CredentialsFor(name string) (provider.Credentials, bool) {
	if c, ok := a.ProviderCredentials[name]; ok {
		return c, true
	}
	if name == ProviderStripe && a.Credentials.SecretKey != "" {
		return a.Credentials, true
	}
	return provider.Credentials{}, false
}

// Metrics observes the money path; implementations must be cheap. prov
// is a provider name (ProviderStripe, ProviderMercadoPago).
type Metrics interface {
	Idempotency(operation, outcome string)
	ProviderCall(prov string, op Operation, outcome provider.Outcome, d time.Duration)
	PaymentTransition(prov string, from, to Status)
	// CircuitState is a provider circuit's new state (CircuitClosed, …).
	CircuitState(provider, state string)
}

// Config wires a Service. Zero durations take the contract's defaults.
type Config struct {
	Store Store
	// Provider is Stripe's adapter; Providers holds every adapter by
	// provider name (ProviderStripe, ProviderMercadoPago), Provider
	// included when it is set.
	Provider  provider.Provider
	Providers map[string]provider.Provider
	Logger    *slog.Logger
	Metrics   Metrics
	// Now is the clock; tests move it to cross leases and retention windows.
	Now func() time.Time
	// NewID makes ids such as pay_…; tests may make them predictable.
	NewID func(prefix string) string

	ProviderTimeout time.Duration // PROVIDER_TIMEOUT
	Lease           time.Duration // IN_PROGRESS_LEASE
	// SettleTimeout bounds one try of the transaction that records a
	// provider's answer. Default 10 s.
	SettleTimeout time.Duration
	// WaitPoll is the first interval at which a payment that waits for the
	// customer is polled (default 1 min); it doubles up to WaitMaxBackoff
	// (default 1 h), and a poll always falls just after its expiry.
	WaitPoll       time.Duration
	WaitMaxBackoff time.Duration
	// CreateBudget is how long a create may take, failovers included
	// (HTTP_WRITE_TIMEOUT); no failover starts a call that could not
	// answer within it. 0: no bound.
	CreateBudget time.Duration
	// CircuitFailures and CircuitCooldown are PROVIDER_CIRCUIT_FAILURES
	// and PROVIDER_CIRCUIT_COOLDOWN.
	CircuitFailures int
	CircuitCooldown time.Duration
	// Tracer, when set, makes each provider call a span; nil: none.
	Tracer trace.TracerProvider
}

// Service runs the money path.
type Service struct {
	store           Store
	providers       map[string]provider.Provider
	log             *slog.Logger
	metrics         Metrics
	now             Clock
	newID           func(string) string
	providerTimeout time.Duration
	lease           time.Duration
	settleTimeout   time.Duration
	waitPoll        time.Duration
	waitMaxBackoff  time.Duration
	createBudget    time.Duration
	circuits        map[string]*gobreaker.TwoStepCircuitBreaker[struct{}]
	tracer          trace.Tracer // nil: tracing off
}

// NewService checks its dependencies and applies defaults.
func NewService(c Config) (*Service, error) {
	providers := make(map[string]provider.Provider, len(c.Providers)+1)
	for name, p := range c.Providers {
		providers[name] = p
	}
	if c.Provider != nil {
		providers[ProviderStripe] = c.Provider
	}
	if c.Store == nil || providers[ProviderStripe] == nil {
		return nil, errors.New("payment: store and Stripe's provider are required")
	}
	s := &Service{
		store: c.Store, providers: providers, log: c.Logger, metrics: c.Metrics,
		newID:           c.NewID,
		providerTimeout: orDefault(c.ProviderTimeout, 10*time.Second),
		lease:           orDefault(c.Lease, 30*time.Second),
		settleTimeout:   orDefault(c.SettleTimeout, 10*time.Second),
		waitPoll:        orDefault(c.WaitPoll, defaultWaitPoll),
		waitMaxBackoff:  orDefault(c.WaitMaxBackoff, defaultWaitMaxBackoff),
		createBudget:    c.CreateBudget,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if c.Tracer != nil {
		s.tracer = c.Tracer.Tracer("github.com/acmepay/payments/internal/payment")
	}
	if s.metrics == nil {
		s.metrics = nopMetrics{}
	}
	s.now = NewClock(c.Now)
	names := make([]string, 0, len(providers))
	for name := range providers {
		names = append(names, name)
	}
	failures := c.CircuitFailures
	if failures <= 0 {
		failures = DefaultCircuitFailures
	}
	s.circuits = newCircuits(names, failures, orDefault(c.CircuitCooldown, DefaultCircuitCooldown), s.log, s.metrics)
	if s.newID == nil {
		s.newID = NewID
	}
	return s, nil
}

// NewID returns prefix_ followed by a time-ordered random UUID.
func NewID(prefix string) string {
	return prefix + "_" + strings.ReplaceAll(uuid.Must(uuid.NewV7()).String(), "-", "")
}

// clock returns the service time at the database's precision, so a stored
// response and a later read of the same row render identically.
func (s *Service) clock() time.Time { return s.now() }

// Clock is the service's time at the database's precision (UTC,
// microseconds), so a stored answer and a later read of the same row
// render identically. Every package on the money path reads time through
// one Clock; tests move it.
type Clock func() time.Time

// NewClock reads now (time.Now when nil) at the database's precision.
func NewClock(now func() time.Time) Clock {
	if now == nil {
		now = time.Now
	}
	return func() time.Time { return now().UTC().Truncate(time.Microsecond) }
}

// Get returns one of the account's payments.
func (s *Service) Get(ctx context.Context, accountID, id string) (*Payment, error) {
	return s.store.PaymentGetByID(ctx, accountID, id)
}

// ListByOrder returns the account's payments for an order, oldest first.
func (s *Service) ListByOrder(ctx context.Context, accountID, orderID string, limit int) ([]*Payment, error) {
	return s.store.PaymentListByOrder(ctx, accountID, orderID, limit)
}

// GetRefund reads one refund of the account.
func (s *Service) GetRefund(ctx context.Context, accountID, id string) (*Refund, error) {
	return s.store.RefundGetByID(ctx, accountID, id)
}

// ListRefunds pages the refunds of one of the account's payments, oldest
// first. startingAfter is the id of the previous page's last refund; one
// that is not a refund of this payment is refused, as a token the list did
// not issue.
func (s *Service) ListRefunds(ctx context.Context, accountID, paymentID, startingAfter string, limit int) ([]*Refund, error) {
	if _, err := s.store.PaymentGetByID(ctx, accountID, paymentID); err != nil {
		return nil, err
	}
	var after *Refund
	if startingAfter != "" {
		r, err := s.store.RefundGetByID(ctx, accountID, startingAfter)
		if errors.Is(err, ErrNotFound) || err == nil && r.PaymentID != paymentID {
			return nil, fieldError("starting_after", "must be the id of a refund of this payment")
		}
		if err != nil {
			return nil, err
		}
		after = r
	}
	return s.store.RefundListByPaymentAfter(ctx, accountID, paymentID, after, limit)
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

type nopMetrics struct{}

func (nopMetrics) CircuitState(string, string) {}

func (nopMetrics) Idempotency(string, string)                                      {}
func (nopMetrics) ProviderCall(string, Operation, provider.Outcome, time.Duration) {}
func (nopMetrics) PaymentTransition(string, Status, Status)                        {}

// CountTransition observes a payment's move from one status to its
// current one, for a change written outside Apply.
func (s *Service) CountTransition(p *Payment, from Status) {
	s.metrics.PaymentTransition(ProviderOf(p.Provider), from, p.Status)
}
