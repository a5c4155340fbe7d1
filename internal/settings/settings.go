// Package settings is the one list of the service's environment settings:
// each one's name, default and meaning. cmd/payments reads its settings
// through Env, which knows only the listed names and supplies their
// defaults, and docs/configuration.md is generated from the same list
// (go generate ./internal/settings), so the reference and the parser
// cannot disagree.
package settings

//go:generate go run ./gendoc -o ../../docs/configuration.md

import "fmt"

// Setting is one environment variable of `payments`.
type Setting struct {
	Name string
	// Default is the value Env returns when the variable is unset or
	// empty; "" when the setting has no value by default.
	Default string
	// Shown is how the default reads in the reference when it is not a
	// value the parser takes ("required", "`DATABASE_URL`", "Stripe's
	// own"); "" shows Default, or "unset".
	Shown string
	// Doc is one line of Markdown: what the setting does and its bounds.
	Doc string
}

// ShownDefault is the default as the reference shows it.
func (s Setting) ShownDefault() string {
	switch {
	case s.Shown != "":
		return s.Shown
	case s.Default != "":
		return "`" + s.Default + "`"
	}
	return "unset"
}

// All lists every setting in the order the reference shows them.
var All = []Setting{
	{Name: "DATABASE_URL", Shown: "required",
		Doc: "PostgreSQL URL; may go through PgBouncer and name several hosts (see [Production database](operating.md#production-database)). `pool_max_conns=N` in it sizes the connection pool (default pgxpool's: the larger of 4 and the number of CPUs)"},
	{Name: "MIGRATE_DATABASE_URL", Shown: "`DATABASE_URL`",
		Doc: "a direct, session-capable URL for the migrations and their advisory lock, and for the webhook delivery queue, when `DATABASE_URL` goes through a transaction pooler"},
	{Name: "ENCRYPTION_KEY", Shown: "required",
		Doc: "base64 of 32 bytes (`openssl rand -base64 32`); encrypts provider secrets at rest (AES-GCM); checked against a stored canary at start"},
	{Name: "ENCRYPTION_KEY_PREVIOUS",
		Doc: "the old key during a rotation (see [Rotating the encryption key](operating.md#rotating-the-encryption-key))"},
	{Name: "HTTP_ADDR", Default: ":8080",
		Doc: "address of the API (and of `/metrics` unless `METRICS_ADDR` is set)"},
	{Name: "ADMIN_TOKEN",
		Doc: "bearer token of `/admin/v1` and the console's sign-in; unset, the admin API answers 404. At least 32 characters (`openssl rand -hex 32`); a shorter one stops start-up. See [Admin authentication](operating.md#admin-authentication)"},
	{Name: "TRUSTED_PROXY_CIDRS",
		Doc: "comma-separated CIDRs (or addresses) of the proxies whose `X-Forwarded-For` names the client address failed admin authentications are counted against; unset, the connection's peer is the client"},
	{Name: "METRICS_ADDR",
		Doc: "when set (e.g. `127.0.0.1:9090`), `/metrics` is served on this address only, and `HTTP_ADDR` answers it 404; unset, `/metrics` is on `HTTP_ADDR`"},
	{Name: "STRIPE_API_BASE", Shown: "Stripe's own",
		Doc: "where the Stripe client sends requests (the simulator locally)"},
	{Name: "MERCADOPAGO_API_BASE", Shown: "Mercado Pago's own",
		Doc: "where the Mercado Pago adapter sends requests (the simulator locally); an http(s) URL"},
	{Name: "PROVIDER_TIMEOUT", Default: "10s",
		Doc: "bound of one provider call; keep it shorter than the lease (start-up warns otherwise)"},
	{Name: "IN_PROGRESS_LEASE", Default: "30s",
		Doc: "how long an in-flight request owns its key; after it a retry takes over recovery of the same attempt"},
	{Name: "PROVIDER_KEY_RETENTION", Default: "24h",
		Doc: "how long Stripe remembers an idempotency key (it documents 24h); the re-send window ends a margin before it (see [What a provider answer proves](architecture.md#what-a-provider-answer-proves))"},
	{Name: "IDEMPOTENCY_RESPONSE_TTL", Default: "72h",
		Doc: "stored responses are replayed byte for byte this long"},
	{Name: "IDEMPOTENCY_TOMBSTONE_TTL", Default: "9600h",
		Doc: "(400 days) after the response is purged, a tombstone remains: a retry gets `200` with the payment's current state and `Idempotent-Replayed: true`, never a new charge"},
	{Name: "RECONCILE_INTERVAL", Default: "30s",
		Doc: "reconciler period"},
	{Name: "RECONCILE_AFTER", Default: "15s",
		Doc: "age before the reconciler takes an unresolved attempt, and its first pause between tries"},
	{Name: "RECONCILE_MAX_BACKOFF", Default: "1h",
		Doc: "longest pause between two tries of one attempt (not shorter than `RECONCILE_AFTER`)"},
	{Name: "RECONCILE_ALERT_AFTER", Default: "1h",
		Doc: "age at which an unresolved attempt is flagged for a person"},
	{Name: "RECONCILE_RATE", Default: "25",
		Doc: "attempts the reconciler takes per second, per instance, each one provider lookup (a waiting payment's poll included); keeps a backlog from taking the provider's rate limit from the API (positive)"},
	{Name: "PROVIDER_SEARCH_GRACE", Default: "5m",
		Doc: "how long \"not found at the provider\" is not yet proof of no effect; must cover Stripe's search lag (see [Choosing the search grace](architecture.md#choosing-the-search-grace))"},
	{Name: "MERCADOPAGO_KEY_RETENTION", Default: "0s",
		Doc: "Mercado Pago's key retention (see [What a provider answer proves](architecture.md#what-a-provider-answer-proves)); `0s`: its keys are only looked up on recovery, never re-sent. Set it only to a retention Mercado Pago guarantees (0s or more)"},
	{Name: "MERCADOPAGO_SEARCH_GRACE", Default: "5m",
		Doc: "Mercado Pago's search lag: how long \"not found\" by a search on `external_reference` is not yet proof of no effect (positive); must cover its search lag (see [Choosing the search grace](architecture.md#choosing-the-search-grace))"},
	{Name: "PROVIDER_CIRCUIT_FAILURES", Default: "5",
		Doc: "consecutive first sends that proved a provider unreachable before its circuit opens; while open, creates skip it without an attempt (1–1000)"},
	{Name: "PROVIDER_CIRCUIT_COOLDOWN", Default: "30s",
		Doc: "how long an open circuit stays open; then one trial call decides (positive)"},
	{Name: "PURGE_INTERVAL", Default: "1h",
		Doc: "retention purge period"},
	{Name: "AUDIT_INTERVAL", Default: "1h",
		Doc: "period of the discrepancy audit in `serve`"},
	{Name: "AUDIT_WINDOW", Default: "72h",
		Doc: "the audit compares final payments changed within it (and `reconcile --audit` without `--since`)"},
	{Name: "AUDIT_RATE", Default: "10",
		Doc: "the audit's provider calls per second (a token bucket, positive); keep it under the provider's read limit"},
	{Name: "DB_STATEMENT_TIMEOUT", Default: "5s",
		Doc: "longest database statement; beyond it the request answers 503 `unavailable` (migrations run without it)"},
	{Name: "DB_LOCK_TIMEOUT", Default: "2s",
		Doc: "longest wait for a lock another session holds; beyond it 503 `unavailable` (migrations run without it). A provider's webhook that waits on its payment's lock past it is answered 503 too, with nothing of it stored, so the provider redelivers it and the redelivery applies once"},
	{Name: "DB_IDLE_IN_TRANSACTION_TIMEOUT", Default: "10s",
		Doc: "the database ends a session left idle inside a transaction, releasing its locks"},
	{Name: "HTTP_READ_TIMEOUT", Default: "15s",
		Doc: "the whole request, headers and body, must arrive within it; a slower client's connection is closed"},
	{Name: "HTTP_WRITE_TIMEOUT", Default: "60s",
		Doc: "the answer must be written within it from the end of the request headers; must be longer than `PROVIDER_TIMEOUT` plus `DB_STATEMENT_TIMEOUT` (start-up refuses otherwise). A create fails over to another provider only while a whole further call and its recording still fit in it"},
	{Name: "HTTP_IDLE_TIMEOUT", Default: "120s",
		Doc: "a kept-alive connection with no request is closed after it"},
	{Name: "HTTP_MAX_HEADER_BYTES", Default: "65536",
		Doc: "largest request header block, 1024 to 16777216; larger is `431`"},
	{Name: "WEBHOOK_ALLOW_PRIVATE", Default: "false",
		Doc: "`true` lets webhook endpoints be http and non-public addresses (local runs and tests only)"},
	{Name: "LOG_LEVEL", Default: "info",
		Doc: "`debug`, `info`, `warn` or `error`"},
	{Name: "OTEL_EXPORTER_OTLP_ENDPOINT",
		Doc: "OTLP/HTTP collector (e.g. `http://127.0.0.1:4318`): traces are on when this or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, off otherwise (no tracer at all). See [observability](observability.md)"},
	{Name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		Doc: "the traces' own OTLP/HTTP endpoint, used as is; overrides `OTEL_EXPORTER_OTLP_ENDPOINT`"},
	{Name: "OTEL_EXPORTER_OTLP_PROTOCOL", Shown: "`http/protobuf`",
		Doc: "only `http/protobuf` is supported; anything else stops start-up"},
	{Name: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", Shown: "`OTEL_EXPORTER_OTLP_PROTOCOL`",
		Doc: "as `OTEL_EXPORTER_OTLP_PROTOCOL`, for traces"},
	{Name: "OTEL_TRACES_EXPORTER", Shown: "`otlp`",
		Doc: "`otlp`, or `none` to turn traces off"},
	{Name: "OTEL_SDK_DISABLED", Shown: "`false`",
		Doc: "`true` turns traces off whatever else is set"},
	{Name: "OTEL_SERVICE_NAME", Shown: "`payments`",
		Doc: "the traces' `service.name`"},
	{Name: "OTEL_TRACES_SAMPLER", Shown: "`parentbased_always_on`",
		Doc: "`always_on`, `always_off`, `traceidratio`, `parentbased_always_on`, `parentbased_always_off` or `parentbased_traceidratio`"},
	{Name: "OTEL_TRACES_SAMPLER_ARG", Shown: "`1`",
		Doc: "the ratio (0 to 1) of the `traceidratio` samplers"},
}

// Lookup returns the named setting; ok is false for a name not listed.
func Lookup(name string) (s Setting, ok bool) {
	for _, s := range All {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// Env reads listed settings from getenv: a variable unset or empty reads
// as its default. It panics on a name not in All, so a setting cannot be
// parsed without being documented.
func Env(getenv func(string) string) func(name string) string {
	return func(name string) string {
		s, ok := Lookup(name)
		if !ok {
			panic(fmt.Sprintf("settings: %s is not in settings.All", name))
		}
		if v := getenv(name); v != "" {
			return v
		}
		return s.Default
	}
}
