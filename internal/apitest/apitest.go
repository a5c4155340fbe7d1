// Package apitest is the shared harness of the HTTP tests: a fresh database,
// the provider simulator in-process, any number of service instances on that
// database, a movable clock, captured logs, and a client that validates every
// response against openapi.yaml.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/app"
	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/metrics"
	"github.com/acmepay/payments/internal/notify"
	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/reconcile"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"go.opentelemetry.io/otel/trace"
)

// EncryptionKey is the test ENCRYPTION_KEY (32 bytes).
var EncryptionKey = []byte("0123456789abcdef0123456789abcdef")

// AdminToken is the test ADMIN_TOKEN (at least 32 characters, as serve
// requires).
const AdminToken = "admin-token-for-tests-0b9f7c2e5d8a41f3"

// Clock is a movable clock: real time plus an offset, so timeouts behave
// and tests can jump past leases and retention windows.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the current test time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// Options tune an Env; zero values take test defaults.
type Options struct {
	ProviderTimeout time.Duration
	Lease           time.Duration
	// KeyRetention is the service's PROVIDER_KEY_RETENTION and the
	// simulator's own key retention, as in production.
	KeyRetention time.Duration
	SearchGrace  time.Duration
	// MercadoPagoKeyRetention is MERCADOPAGO_KEY_RETENTION (0: Mercado
	// Pago's keys are only looked up, never re-sent) and, when set, the
	// simulated Mercado Pago's own retention.
	MercadoPagoKeyRetention time.Duration
	// CircuitFailures is PROVIDER_CIRCUIT_FAILURES (default 5), and
	// CircuitCooldown PROVIDER_CIRCUIT_COOLDOWN (default 30s).
	CircuitFailures int
	CircuitCooldown time.Duration
	// MercadoPagoAPIBase, when set, is where the instances send Mercado
	// Pago's calls instead of the simulator.
	MercadoPagoAPIBase string
	// WrapProvider, when set, wraps every instance's provider adapters,
	// each under its provider name (payment.ProviderStripe,
	// payment.ProviderMercadoPago), so a test can watch the calls the
	// service makes. A wrapper that embeds provider.Provider hides
	// Mercado Pago's provider.AttemptSearcher unless it forwards it.
	WrapProvider func(name string, p provider.Provider) provider.Provider
	// WrapStore, when set, wraps every instance's store, so a test can fail
	// chosen transactions.
	WrapStore func(payment.Store) payment.Store
	// WebhookAllowPrivate is WEBHOOK_ALLOW_PRIVATE: endpoints on this
	// machine's test receivers need it.
	WebhookAllowPrivate bool
	// DBLockTimeout is DB_LOCK_TIMEOUT (0: none), so a test can hold a row
	// lock longer than a request may wait for it.
	DBLockTimeout time.Duration
	// TracerProvider, when set, traces the instances as the OTEL_*
	// settings do in serve (a test passes one with an in-memory exporter).
	TracerProvider trace.TracerProvider
}

// Env is one test's world.
type Env struct {
	T       testing.TB
	DB      *postgres.DB
	DBURL   string
	Sim     *providersim.Server
	SimURL  string
	Clock   *Clock
	Logs    *SyncBuffer
	Opts    Options
	Account account.Account
	APIKey  string
	// URL is the first service instance, and Router its routes.
	URL    string
	Router http.Handler
	// Metrics of the first instance.
	Metrics *metrics.Metrics
	// Counter counts the first instance's database round trips.
	Counter  *postgres.Counter
	Accounts *account.Service
	Payments *payment.Service
	// Operations is the first instance's operations (admin, audit,
	// discrepancies).
	Operations *operations.Service
	// Reconciler is the first instance's.
	Reconciler *reconcile.Reconciler
	// Webhooks is the first instance's endpoint service, and WebhookWorker
	// a delivery worker on the test's clock that a test runs job by job.
	Webhooks      *notify.Service
	WebhookWorker *notify.Worker
	// Inbound is the first instance's taker of provider events.
	Inbound *inbound.Service

	doc    *openapi3.T
	router routers.Router
}

// New builds an Env with one service instance and one account.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.ProviderTimeout == 0 {
		opts.ProviderTimeout = 3 * time.Second
	}
	if opts.Lease == 0 {
		opts.Lease = 10 * time.Second
	}
	e := &Env{T: t, Clock: &Clock{}, Logs: &SyncBuffer{}, Opts: opts, Counter: &postgres.Counter{}}
	e.DBURL = postgrestest.URL(t)
	if postgrestest.Pooled(t) {
		// TEST_POOLER=pgbouncer: every instance, and the test's own pool,
		// goes through PgBouncer in transaction mode.
		e.DBURL = postgrestest.PgBouncer(t, e.DBURL)
	}
	db, err := postgres.Open(context.Background(), e.DBURL)
	if err != nil {
		t.Fatalf("open database: %v", err)
	}
	t.Cleanup(db.Close)
	e.DB = db
	e.Sim = providersim.New(providersim.Options{Now: e.Clock.Now, KeyRetention: opts.KeyRetention})
	if opts.MercadoPagoKeyRetention > 0 {
		e.Sim.SetMPKeyRetention(opts.MercadoPagoKeyRetention)
	}
	simSrv := httptest.NewServer(e.Sim)
	t.Cleanup(simSrv.Close)
	t.Cleanup(e.Sim.ClearFaults)
	e.SimURL = simSrv.URL
	e.loadSpec()
	e.URL, e.Payments, e.Metrics = e.StartInstance()
	e.Account, e.APIKey = e.CreateAccount("Loja Um", "sk_test_"+SecretSuffix(t))
	return e
}

// WrapStripe is a WrapProvider that wraps Stripe's adapter alone with
// wrap and leaves every other provider's as it is.
func WrapStripe(wrap func(provider.Provider) provider.Provider) func(string, provider.Provider) provider.Provider {
	return func(name string, p provider.Provider) provider.Provider {
		if name != payment.ProviderStripe {
			return p
		}
		return wrap(p)
	}
}

// Logger is the JSON logger every instance writes to the captured buffer.
func (e *Env) Logger() *slog.Logger { return logging.New(e.Logs, slog.LevelDebug) }

// StartInstance starts another service instance on the same database, with
// its own pool, and returns its URL.
func (e *Env) StartInstance() (string, *payment.Service, *metrics.Metrics) {
	t := e.T
	a, err := app.New(context.Background(), e.instanceConfig())
	if err != nil {
		t.Fatalf("service instance: %v", err)
	}
	t.Cleanup(a.Close)
	if e.Accounts == nil {
		e.Accounts = a.Accounts
	}
	if e.Operations == nil {
		e.Operations, e.Reconciler = a.Operations, a.Reconciler
	}
	if e.Webhooks == nil {
		e.Webhooks, e.WebhookWorker = a.Webhooks, a.WebhookWorker
	}
	if e.Inbound == nil {
		e.Inbound = a.Inbound
	}
	h := a.Handler()
	if e.Router == nil {
		e.Router = h
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL, a.Payments, a.Metrics
}

// instanceConfig is production's composition with the test's seams: the
// simulator as Stripe without client retries (a fault is seen once), the
// movable clock, captured logs, the wrappers of Options, and a database
// that comes migrated. Only the first instance's round trips are counted;
// behind the pooler every session carries production's timeouts.
func (e *Env) instanceConfig() app.Config {
	c := app.Config{
		DatabaseURL: e.DBURL, SkipMigrations: true,
		StripeAPIBase: e.SimURL, MercadoPagoAPIBase: e.SimURL, EncryptionKey: EncryptionKey, AdminToken: AdminToken,
		WebhookAllowPrivate: e.Opts.WebhookAllowPrivate,
		ProviderTimeout:     e.Opts.ProviderTimeout, InProgressLease: e.Opts.Lease,
		ProviderKeyRetention: e.Opts.KeyRetention, ProviderSearchGrace: e.Opts.SearchGrace,
		MercadoPagoKeyRetention: e.Opts.MercadoPagoKeyRetention, CircuitFailures: e.Opts.CircuitFailures, CircuitCooldown: e.Opts.CircuitCooldown,
		Logger: e.Logger(), Now: e.Clock.Now,
		WrapProvider: e.Opts.WrapProvider, WrapStore: e.Opts.WrapStore, TracerProvider: e.Opts.TracerProvider,
	}
	if e.Opts.MercadoPagoAPIBase != "" {
		c.MercadoPagoAPIBase = e.Opts.MercadoPagoAPIBase
	}
	if e.URL == "" {
		c.DBOptions = []postgres.Option{postgres.WithCounter(e.Counter)}
	}
	if postgrestest.Pooled(e.T) {
		to := postgrestest.PooledTimeouts
		c.DBStatementTimeout, c.DBLockTimeout, c.DBIdleInTransactionTimeout = to[0], to[1], to[2]
	}
	if e.Opts.DBLockTimeout > 0 {
		c.DBLockTimeout = e.Opts.DBLockTimeout
	}
	return c
}

// CreateAccount makes an account with the given provider secret.
func (e *Env) CreateAccount(name, secret string) (account.Account, string) {
	a, key, err := e.Accounts.Create(context.Background(), name, secret, "")
	if err != nil {
		e.T.Fatalf("create account: %v", err)
	}
	return a, key
}

func (e *Env) loadSpec() {
	root, err := moduleRoot()
	if err != nil {
		e.T.Fatalf("module root: %v", err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(filepath.Join(root, "openapi.yaml"))
	if err != nil {
		e.T.Fatalf("load openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		e.T.Fatalf("openapi.yaml is invalid: %v", err)
	}
	// Match requests by path only, whatever host the test server has.
	doc.Servers = nil
	r, err := legacy.NewRouter(doc)
	if err != nil {
		e.T.Fatalf("openapi router: %v", err)
	}
	e.doc, e.router = doc, r
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// Response is a finished HTTP exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r *Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("decode %d body %q: %v", r.Status, r.Body, err)
	}
	return m
}

// Code is the problem code of an error response.
func (r *Response) Code(t testing.TB) string {
	t.Helper()
	c, _ := r.JSON(t)["code"].(string)
	return c
}

// Request describes one call.
type Request struct {
	Method  string
	Path    string
	Key     string // Idempotency-Key; "" sends none
	Body    string
	Bearer  string // defaults to the Env's API key
	Headers map[string]string
	BaseURL string // defaults to the first instance
}

// Do performs the request, validates the response against openapi.yaml and
// returns it. A transport error fails the test.
func (e *Env) Do(r Request) *Response {
	e.T.Helper()
	resp, err := e.TryDo(r)
	if err != nil {
		e.T.Fatalf("%s %s: %v", r.Method, r.Path, err)
	}
	return resp
}

// TryDo is Do that returns transport errors.
func (e *Env) TryDo(r Request) (*Response, error) {
	base := r.BaseURL
	if base == "" {
		base = e.URL
	}
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequest(r.Method, base+r.Path, body)
	if err != nil {
		return nil, err
	}
	if r.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	bearer := r.Bearer
	if bearer == "" {
		bearer = e.APIKey
	}
	if bearer != "-" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if r.Key != "" {
		req.Header.Set("Idempotency-Key", r.Key)
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer hr.Body.Close()
	b, err := io.ReadAll(hr.Body)
	if err != nil {
		return nil, err
	}
	resp := &Response{Status: hr.StatusCode, Header: hr.Header, Body: b}
	e.validate(req, r.Body, resp)
	return resp, nil
}

// validate checks a response against openapi.yaml; any mismatch fails the
// test.
func (e *Env) validate(req *http.Request, body string, resp *Response) {
	e.T.Helper()
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(strings.NewReader(body))
	route, params, err := e.router.FindRoute(vreq)
	if err != nil {
		if resp.Status == http.StatusNotFound || resp.Status == http.StatusMethodNotAllowed {
			return // a path the API does not have
		}
		e.T.Errorf("openapi: no route for %s %s: %v", req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route},
		Status:                 resp.Status, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(resp.Body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		e.T.Errorf("openapi: %s %s -> %d does not match openapi.yaml: %v\nbody: %s", req.Method, req.URL.Path, resp.Status, err, resp.Body)
	}
}

// SyncBuffer is a goroutine-safe log sink.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// HTTPClient is an HTTP client for generated API clients: every response it
// returns is validated against openapi.yaml, as Do validates its own.
func (e *Env) HTTPClient() *http.Client {
	return &http.Client{Transport: validatingTransport{e: e}}
}

type validatingTransport struct{ e *Env }

func (v validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	hr, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(hr.Body)
	hr.Body.Close()
	if err != nil {
		return nil, err
	}
	hr.Body = io.NopCloser(bytes.NewReader(b))
	v.e.validate(req, string(body), &Response{Status: hr.StatusCode, Header: hr.Header, Body: b})
	return hr, nil
}

// ReconcileStore is the store a reconciler of this test claims through.
func (e *Env) ReconcileStore() *postgres.PaymentStore { return postgres.NewPaymentStore(e.DB) }

// ServiceClock is the test clock at the database's precision, as the
// service reads it.
func (e *Env) ServiceClock() payment.Clock { return payment.NewClock(e.Clock.Now) }
