package main

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/settings"
	"github.com/acmepay/payments/internal/telemetry"
)

// config is every setting, read from the environment.
type config struct {
	DatabaseURL string
	// MigrateDatabaseURL is a direct, session-capable URL for the
	// migrations and their advisory lock, for when DatabaseURL goes
	// through a transaction pooler; DatabaseURL when unset.
	MigrateDatabaseURL string
	HTTPAddr           string
	// WebhookAllowPrivate (WEBHOOK_ALLOW_PRIVATE=true, local runs and
	// tests only) lets webhook endpoints be http and non-public addresses.
	WebhookAllowPrivate bool
	AdminToken          string
	// MetricsAddr, when set, serves /metrics there and not on HTTPAddr.
	MetricsAddr string
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// address that failed admin authentications are counted against.
	TrustedProxies []netip.Prefix
	StripeAPIBase  string
	EncryptionKey  []byte
	// EncryptionKeyPrevious opens secrets not yet moved to EncryptionKey
	// during a key rotation; nil outside one.
	EncryptionKeyPrevious []byte
	ProviderTimeout       time.Duration
	InProgressLease       time.Duration
	ProviderKeyRetention  time.Duration
	ResponseTTL           time.Duration
	TombstoneTTL          time.Duration
	ReconcileInterval     time.Duration
	ReconcileAfter        time.Duration
	// ReconcileMaxBackoff caps the pause between two tries of one attempt;
	// ReconcileAlertAfter is the age at which an unresolved attempt is
	// flagged for a person.
	ReconcileMaxBackoff time.Duration
	ReconcileAlertAfter time.Duration
	// ReconcileRate is RECONCILE_RATE: the attempts the reconciler takes
	// per second, each one provider lookup.
	ReconcileRate       float64
	ProviderSearchGrace time.Duration
	// MercadoPagoKeyRetention (MERCADOPAGO_KEY_RETENTION, default 0s: Mercado
	// Pago documents none, so its keys are only looked up on recovery) and
	// MercadoPagoSearchGrace (MERCADOPAGO_SEARCH_GRACE, 5m) make Mercado
	// Pago's idempotency profile (CONTRACT §15).
	MercadoPagoKeyRetention time.Duration
	MercadoPagoSearchGrace  time.Duration
	// MercadoPagoAPIBase is MERCADOPAGO_API_BASE ("" is Mercado Pago's own).
	MercadoPagoAPIBase string
	PurgeInterval      time.Duration
	// AuditInterval and AuditWindow: how often serve compares final
	// payments changed within the window with the provider; AuditRate caps
	// the audit's provider calls per second.
	AuditInterval time.Duration
	AuditWindow   time.Duration
	AuditRate     float64
	// Bounds of every database session, so one stalled writer cannot
	// freeze the requests waiting on its locks.
	DBStatementTimeout         time.Duration
	DBLockTimeout              time.Duration
	DBIdleInTransactionTimeout time.Duration
	// Bounds of every HTTP connection, so slow or idle clients cannot hold
	// connections for ever.
	HTTPReadTimeout  time.Duration
	HTTPWriteTimeout time.Duration
	// CircuitFailures and CircuitCooldown are PROVIDER_CIRCUIT_FAILURES
	// and PROVIDER_CIRCUIT_COOLDOWN.
	CircuitFailures    int
	CircuitCooldown    time.Duration
	HTTPIdleTimeout    time.Duration
	HTTPMaxHeaderBytes int
	LogLevel           slog.Level
	// Tracing is the OTEL_* settings: off unless an OTLP endpoint is set
	// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
	// and OTEL_SDK_DISABLED is not true; OTEL_SERVICE_NAME (payments),
	// OTEL_TRACES_SAMPLER (parentbased_always_on) and
	// OTEL_TRACES_SAMPLER_ARG shape it.
	Tracing telemetry.Settings
}

// defaultAuditRate keeps the audit well under Stripe's live-mode read
// limit, leaving the rest to the money path.
const defaultAuditRate = 10

// defaultReconcileRate paces the reconciler (unknown outcomes and waiting
// payments alike) at a quarter of Stripe's live-mode limit of 100 requests
// a second, so a backlog left by an outage never takes the API's share.
const defaultReconcileRate = 25

// callRate reads a provider calls per second setting: a positive number.
func callRate(getenv func(string) string, name string, def float64) (float64, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		return 0, fmt.Errorf("%s must be a positive number of provider calls per second, not %q", name, v)
	}
	return r, nil
}

// minAdminTokenLen: a shorter ADMIN_TOKEN can be guessed.
const minAdminTokenLen = 32

// checkAdmin reads the settings of the admin doors: the token's length,
// the metrics address and the trusted proxies.
func (c *config) checkAdmin(getenv func(string) string) error {
	if c.AdminToken != "" && utf8.RuneCountInString(c.AdminToken) < minAdminTokenLen {
		return fmt.Errorf("ADMIN_TOKEN must have at least %d characters (make one with: openssl rand -hex 32)", minAdminTokenLen)
	}
	c.MetricsAddr = getenv("METRICS_ADDR")
	if c.MetricsAddr != "" && c.MetricsAddr == c.HTTPAddr {
		return fmt.Errorf("METRICS_ADDR must differ from HTTP_ADDR (%s)", c.HTTPAddr)
	}
	for _, v := range strings.Split(getenv("TRUSTED_PROXY_CIDRS"), ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil {
				return fmt.Errorf("TRUSTED_PROXY_CIDRS must be a comma-separated list of CIDRs such as 10.0.0.0/8, not %q", v)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		c.TrustedProxies = append(c.TrustedProxies, p.Masked())
	}
	return nil
}

// loadConfig returns the first bad or missing setting as one clear error.
// Every setting is read through settings.Env: only listed names, with the
// list's defaults, so docs/configuration.md describes exactly this.
func loadConfig(getenv func(string) string) (config, error) {
	getenv = settings.Env(getenv)
	c := config{
		DatabaseURL:   getenv("DATABASE_URL"),
		HTTPAddr:      getenv("HTTP_ADDR"),
		AdminToken:    getenv("ADMIN_TOKEN"),
		StripeAPIBase: getenv("STRIPE_API_BASE"),
	}
	if c.DatabaseURL == "" {
		return c, fmt.Errorf("DATABASE_URL is required (for example postgres://postgres@127.0.0.1:5432/payments)")
	}
	if c.MigrateDatabaseURL = getenv("MIGRATE_DATABASE_URL"); c.MigrateDatabaseURL == "" {
		c.MigrateDatabaseURL = c.DatabaseURL
	}
	if err := c.checkAdmin(getenv); err != nil {
		return c, err
	}
	switch v := getenv("WEBHOOK_ALLOW_PRIVATE"); v {
	case "", "false":
	case "true":
		c.WebhookAllowPrivate = true
	default:
		return c, fmt.Errorf("WEBHOOK_ALLOW_PRIVATE must be true or false, not %q", v)
	}
	raw := getenv("ENCRYPTION_KEY")
	if raw == "" {
		return c, fmt.Errorf("ENCRYPTION_KEY is required: base64 of 32 random bytes (openssl rand -base64 32)")
	}
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(key) != 32 {
		return c, fmt.Errorf("ENCRYPTION_KEY must be base64 of exactly 32 bytes (openssl rand -base64 32)")
	}
	c.EncryptionKey = key
	if raw := getenv("ENCRYPTION_KEY_PREVIOUS"); raw != "" {
		prev, err := base64.StdEncoding.DecodeString(raw)
		if err != nil || len(prev) != 32 {
			return c, fmt.Errorf("ENCRYPTION_KEY_PREVIOUS must be base64 of exactly 32 bytes, or unset")
		}
		c.EncryptionKeyPrevious = prev
	}
	if err := c.loadDurations(getenv); err != nil {
		return c, err
	}
	if c.ReconcileMaxBackoff < c.ReconcileAfter {
		return c, fmt.Errorf("RECONCILE_MAX_BACKOFF (%s) must not be shorter than RECONCILE_AFTER (%s)", c.ReconcileMaxBackoff, c.ReconcileAfter)
	}
	if c.CircuitFailures, err = circuitFailures(getenv("PROVIDER_CIRCUIT_FAILURES")); err != nil {
		return c, err
	}
	if c.AuditRate, err = callRate(getenv, "AUDIT_RATE", defaultAuditRate); err != nil {
		return c, err
	}
	if c.ReconcileRate, err = callRate(getenv, "RECONCILE_RATE", defaultReconcileRate); err != nil {
		return c, err
	}
	if err := c.checkHTTP(getenv("HTTP_MAX_HEADER_BYTES")); err != nil {
		return c, err
	}
	if err := c.loadMercadoPago(getenv); err != nil {
		return c, err
	}
	if c.LogLevel, err = logging.ParseLevel(getenv("LOG_LEVEL")); err != nil {
		return c, err
	}
	if c.Tracing, err = telemetry.Load(getenv); err != nil {
		return c, err
	}
	return c, nil
}

// loadDurations reads every duration setting (its default comes from
// settings.All); each must be positive.
func (c *config) loadDurations(getenv func(string) string) error {
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{
		{"PROVIDER_TIMEOUT", &c.ProviderTimeout},
		{"IN_PROGRESS_LEASE", &c.InProgressLease},
		{"PROVIDER_KEY_RETENTION", &c.ProviderKeyRetention},
		{"IDEMPOTENCY_RESPONSE_TTL", &c.ResponseTTL},
		{"IDEMPOTENCY_TOMBSTONE_TTL", &c.TombstoneTTL},
		{"RECONCILE_INTERVAL", &c.ReconcileInterval},
		{"RECONCILE_AFTER", &c.ReconcileAfter},
		{"RECONCILE_MAX_BACKOFF", &c.ReconcileMaxBackoff},
		{"RECONCILE_ALERT_AFTER", &c.ReconcileAlertAfter},
		{"PROVIDER_SEARCH_GRACE", &c.ProviderSearchGrace},
		{"PURGE_INTERVAL", &c.PurgeInterval},
		{"AUDIT_INTERVAL", &c.AuditInterval},
		{"AUDIT_WINDOW", &c.AuditWindow},
		{"DB_STATEMENT_TIMEOUT", &c.DBStatementTimeout},
		{"DB_LOCK_TIMEOUT", &c.DBLockTimeout},
		{"DB_IDLE_IN_TRANSACTION_TIMEOUT", &c.DBIdleInTransactionTimeout},
		{"HTTP_READ_TIMEOUT", &c.HTTPReadTimeout},
		{"HTTP_WRITE_TIMEOUT", &c.HTTPWriteTimeout},
		{"HTTP_IDLE_TIMEOUT", &c.HTTPIdleTimeout},
		{"PROVIDER_CIRCUIT_COOLDOWN", &c.CircuitCooldown},
	} {
		v := getenv(d.name)
		parsed, err := time.ParseDuration(v)
		if err != nil || parsed <= 0 {
			return fmt.Errorf("%s must be a positive Go duration such as 30s or 72h, not %q", d.name, v)
		}
		*d.dst = parsed
	}
	return nil
}

// circuitFailures reads PROVIDER_CIRCUIT_FAILURES.
func circuitFailures(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, fmt.Errorf("PROVIDER_CIRCUIT_FAILURES must be a whole number from 1 to 1000, not %q", v)
	}
	return n, nil
}

// loadMercadoPago reads Mercado Pago's idempotency profile. Its retention
// may be zero (the default: keys are never re-sent on recovery); its search
// grace may not, or a search that lags would prove no effect.
func (c *config) loadMercadoPago(getenv func(string) string) error {
	if v := getenv("MERCADOPAGO_API_BASE"); v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("MERCADOPAGO_API_BASE must be an http(s) URL such as https://api.mercadopago.com, not %q", v)
		}
		c.MercadoPagoAPIBase = v
	}
	v := getenv("MERCADOPAGO_KEY_RETENTION")
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("MERCADOPAGO_KEY_RETENTION must be a Go duration of 0s or more such as 0s or 24h, not %q", v)
	}
	c.MercadoPagoKeyRetention = d
	v = getenv("MERCADOPAGO_SEARCH_GRACE")
	if d, err = time.ParseDuration(v); err != nil || d <= 0 {
		return fmt.Errorf("MERCADOPAGO_SEARCH_GRACE must be a positive Go duration such as 5m, not %q", v)
	}
	c.MercadoPagoSearchGrace = d
	return nil
}
