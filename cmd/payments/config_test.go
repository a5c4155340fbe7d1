package main

import (
	"encoding/base64"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/settings"
)

func env(kv ...string) func(string) string {
	m := map[string]string{
		"DATABASE_URL":   "postgres://127.0.0.1/x",
		"ENCRYPTION_KEY": base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")),
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8080" || c.ProviderTimeout != 10*time.Second || c.InProgressLease != 30*time.Second ||
		c.ResponseTTL != 72*time.Hour || c.TombstoneTTL != 9600*time.Hour || c.ProviderKeyRetention != 24*time.Hour {
		t.Fatalf("defaults = %+v", c)
	}
	// Short windows for tests and drills start: a short lease is safe (the
	// same provider key is re-sent), a short tombstone window only forgets.
	c, err = loadConfig(env("IN_PROGRESS_LEASE", "1s", "IDEMPOTENCY_TOMBSTONE_TTL", "1s", "IDEMPOTENCY_RESPONSE_TTL", "2s"))
	if err != nil || c.InProgressLease != time.Second || c.TombstoneTTL != time.Second {
		t.Fatalf("short windows: %+v, %v", c, err)
	}
	for _, bad := range [][]string{{"RECONCILE_AFTER", "-1s"}, {"PURGE_INTERVAL", "soon"}, {"ENCRYPTION_KEY", "!!"}} {
		if _, err := loadConfig(env(bad...)); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%s: err %v, want one naming the setting", bad[0], bad[1], err)
		}
	}
}

func TestLoadConfigDatabaseTimeouts(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	if c.DBStatementTimeout != 5*time.Second || c.DBLockTimeout != 2*time.Second || c.DBIdleInTransactionTimeout != 10*time.Second {
		t.Fatalf("defaults = %v, %v, %v; want 5s, 2s, 10s", c.DBStatementTimeout, c.DBLockTimeout, c.DBIdleInTransactionTimeout)
	}
	c, err = loadConfig(env("DB_STATEMENT_TIMEOUT", "30s", "DB_LOCK_TIMEOUT", "500ms", "DB_IDLE_IN_TRANSACTION_TIMEOUT", "1m"))
	if err != nil {
		t.Fatal(err)
	}
	if c.DBStatementTimeout != 30*time.Second || c.DBLockTimeout != 500*time.Millisecond || c.DBIdleInTransactionTimeout != time.Minute {
		t.Fatalf("set = %v, %v, %v; want 30s, 500ms, 1m", c.DBStatementTimeout, c.DBLockTimeout, c.DBIdleInTransactionTimeout)
	}
	// Zero would turn a timeout off: not a value of these settings.
	for _, bad := range [][]string{{"DB_STATEMENT_TIMEOUT", "5"}, {"DB_LOCK_TIMEOUT", "0s"}, {"DB_IDLE_IN_TRANSACTION_TIMEOUT", "-10s"}} {
		_, err := loadConfig(env(bad...))
		if err == nil || !strings.Contains(err.Error(), bad[0]) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%s: err %v, want one line naming the setting", bad[0], bad[1], err)
		}
	}
}

func TestLoadConfigReconcileSchedule(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	if c.ReconcileMaxBackoff != time.Hour || c.ReconcileAlertAfter != time.Hour {
		t.Fatalf("defaults = %v, %v; want 1h, 1h", c.ReconcileMaxBackoff, c.ReconcileAlertAfter)
	}
	c, err = loadConfig(env("RECONCILE_MAX_BACKOFF", "10m", "RECONCILE_ALERT_AFTER", "30m"))
	if err != nil || c.ReconcileMaxBackoff != 10*time.Minute || c.ReconcileAlertAfter != 30*time.Minute {
		t.Fatalf("set = %v, %v, %v; want 10m, 30m", c.ReconcileMaxBackoff, c.ReconcileAlertAfter, err)
	}
	for _, bad := range [][]string{
		{"RECONCILE_MAX_BACKOFF", "0s"}, {"RECONCILE_ALERT_AFTER", "soon"},
		{"RECONCILE_MAX_BACKOFF", "5s"}, // shorter than RECONCILE_AFTER's 15s
	} {
		if _, err := loadConfig(env(bad...)); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%s: err %v, want one naming the setting", bad[0], bad[1], err)
		}
	}
}

// Mercado Pago keeps no key the service may count on unless told: a zero
// retention is valid and the default; its search grace must be positive.
func TestLoadConfigMercadoPagoProfile(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	if c.MercadoPagoKeyRetention != 0 || c.MercadoPagoSearchGrace != 5*time.Minute {
		t.Fatalf("defaults = %v, %v; want 0s, 5m", c.MercadoPagoKeyRetention, c.MercadoPagoSearchGrace)
	}
	c, err = loadConfig(env("MERCADOPAGO_KEY_RETENTION", "24h", "MERCADOPAGO_SEARCH_GRACE", "90s"))
	if err != nil || c.MercadoPagoKeyRetention != 24*time.Hour || c.MercadoPagoSearchGrace != 90*time.Second {
		t.Fatalf("set = %v, %v (%v); want 24h, 90s", c.MercadoPagoKeyRetention, c.MercadoPagoSearchGrace, err)
	}
	if a := c.appConfig(nil); a.MercadoPagoKeyRetention != 24*time.Hour || a.MercadoPagoSearchGrace != 90*time.Second {
		t.Fatalf("app config = %v, %v; want 24h, 90s", a.MercadoPagoKeyRetention, a.MercadoPagoSearchGrace)
	}
	if c, err = loadConfig(env("MERCADOPAGO_KEY_RETENTION", "0s")); err != nil || c.MercadoPagoKeyRetention != 0 {
		t.Fatalf("0s = %v, %v; want 0s accepted", c.MercadoPagoKeyRetention, err)
	}
	for _, bad := range [][]string{{"MERCADOPAGO_KEY_RETENTION", "-1s"}, {"MERCADOPAGO_KEY_RETENTION", "forever"},
		{"MERCADOPAGO_SEARCH_GRACE", "0s"}, {"MERCADOPAGO_SEARCH_GRACE", "-5m"}, {"MERCADOPAGO_SEARCH_GRACE", "soon"}} {
		if _, err := loadConfig(env(bad...)); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%s: err %v, want one naming the setting", bad[0], bad[1], err)
		}
	}
}

// MERCADOPAGO_API_BASE points the Mercado Pago adapter elsewhere (the
// simulator); anything but an http(s) URL is refused at start.
func TestLoadConfigMercadoPagoAPIBase(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env("MERCADOPAGO_API_BASE", "http://127.0.0.1:12111"))
	if err != nil || c.appConfig(nil).MercadoPagoAPIBase != "http://127.0.0.1:12111" {
		t.Fatalf("api base = %q (%v)", c.MercadoPagoAPIBase, err)
	}
	if c, err = loadConfig(env()); err != nil || c.MercadoPagoAPIBase != "" {
		t.Fatalf("default api base = %q (%v), want Mercado Pago's own", c.MercadoPagoAPIBase, err)
	}
	for _, bad := range []string{"api.mercadopago.com", "ftp://x", "http://"} {
		if _, err := loadConfig(env("MERCADOPAGO_API_BASE", bad)); err == nil || !strings.Contains(err.Error(), "MERCADOPAGO_API_BASE") {
			t.Errorf("%q: err %v, want one naming the setting", bad, err)
		}
	}
}

func TestLoadConfigReconcileRate(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	if c.ReconcileRate != 25 {
		t.Fatalf("RECONCILE_RATE default = %v, want 25", c.ReconcileRate)
	}
	if c, err = loadConfig(env("RECONCILE_RATE", "2.5")); err != nil || c.ReconcileRate != 2.5 {
		t.Fatalf("RECONCILE_RATE=2.5: %v, %v", c.ReconcileRate, err)
	}
	for _, bad := range []string{"0", "-1", "fast", "NaN", "Inf"} {
		if _, err := loadConfig(env("RECONCILE_RATE", bad)); err == nil || !strings.Contains(err.Error(), "RECONCILE_RATE") {
			t.Errorf("RECONCILE_RATE=%s: err %v, want one naming the setting", bad, err)
		}
	}
}

func TestLoadConfigTracing(t *testing.T) {
	t.Parallel()
	if c, err := loadConfig(env()); err != nil || c.Tracing.On || c.Tracing.ServiceName != "payments" {
		t.Fatalf("default tracing = %+v (%v), want off, service payments", c.Tracing, err)
	}
	c, err := loadConfig(env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_SERVICE_NAME", "payments-eu",
		"OTEL_TRACES_SAMPLER", "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG", "0.25"))
	if err != nil || !c.Tracing.On || c.Tracing.ServiceName != "payments-eu" ||
		c.Tracing.Sampler.Description() != "ParentBased{root:TraceIDRatioBased{0.25},remoteParentSampled:AlwaysOnSampler,remoteParentNotSampled:AlwaysOffSampler,localParentSampled:AlwaysOnSampler,localParentNotSampled:AlwaysOffSampler}" {
		t.Fatalf("tracing = %+v (%v)", c.Tracing, err)
	}
	for _, off := range [][]string{{"OTEL_SDK_DISABLED", "true"}, {"OTEL_TRACES_EXPORTER", "none"}} {
		if c, err := loadConfig(env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", off[0], off[1])); err != nil || c.Tracing.On {
			t.Errorf("%s=%s: tracing on %v (%v), want off", off[0], off[1], c.Tracing.On, err)
		}
	}
	for _, bad := range [][]string{{"OTEL_SDK_DISABLED", "yes"}, {"OTEL_TRACES_SAMPLER", "sometimes"},
		{"OTEL_TRACES_SAMPLER_ARG", "2"}, {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, {"OTEL_TRACES_EXPORTER", "zipkin"}} {
		kv := append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_TRACES_SAMPLER", "traceidratio"}, bad...)
		if _, err := loadConfig(env(kv...)); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%s: err %v, want one naming the setting", bad[0], bad[1], err)
		}
	}
}

// loadConfig reads exactly the settings of settings.All (the list
// docs/configuration.md is generated from), no more and no fewer.
func TestLoadConfigReadsEverySettingListed(t *testing.T) {
	t.Parallel()
	read := map[string]bool{}
	base := env()
	if _, err := loadConfig(func(k string) string { read[k] = true; return base(k) }); err != nil {
		t.Fatal(err)
	}
	for _, s := range settings.All {
		if !read[s.Name] {
			t.Errorf("%s is listed in settings.All but loadConfig never reads it", s.Name)
		}
		delete(read, s.Name)
	}
	for name := range read {
		t.Errorf("loadConfig reads %s, which settings.All does not list", name)
	}
}

// The defaults of settings.All are the ones the rest of the code assumes.
func TestLoadConfigDefaultsMatchTheCode(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	if c.CircuitFailures != payment.DefaultCircuitFailures || c.CircuitCooldown != payment.DefaultCircuitCooldown ||
		c.MercadoPagoKeyRetention != provider.MercadoPagoKeyRetention || c.MercadoPagoSearchGrace != provider.DefaultSearchLag ||
		c.HTTPMaxHeaderBytes != 64<<10 || c.AuditRate != 10 || c.LogLevel != slog.LevelInfo || c.WebhookAllowPrivate {
		t.Fatalf("defaults = %+v", c)
	}
}
