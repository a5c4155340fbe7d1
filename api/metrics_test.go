package api_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/reconcile"
	"github.com/jackc/pgx/v5"
)

// sample is one series of a scrape.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is GET /metrics, parsed from the Prometheus text format.
type scrape []sample

func scrapeMetrics(t *testing.T, e *apitest.Env) scrape {
	t.Helper()
	// serve refreshes the database-derived gauges on a timer; a test
	// refreshes them now, so each scrape shows the state it just made.
	if err := e.Metrics.RefreshDatabase(context.Background()); err != nil {
		t.Fatalf("refresh database gauges: %v", err)
	}
	return scrapeOnly(t, e)
}

// scrapeOnly reads /metrics as it is, without a refresh.
func scrapeOnly(t *testing.T, e *apitest.Env) scrape {
	t.Helper()
	resp, err := http.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, body)
	}
	var out scrape
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out = append(out, s)
	}
	return out
}

// parseSample reads `name{k="v",…} value`.
func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, strconv.ErrSyntax
	}
	s.name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for line != "" && line[0] != '}' {
			eq := strings.IndexByte(line, '=')
			if eq < 0 || len(line) < eq+2 || line[eq+1] != '"' {
				return s, strconv.ErrSyntax
			}
			key := line[:eq]
			line = line[eq+2:]
			var v strings.Builder
			for {
				if line == "" {
					return s, strconv.ErrSyntax
				}
				c := line[0]
				line = line[1:]
				if c == '"' {
					break
				}
				if c == '\\' && line != "" {
					c, line = line[0], line[1:]
					if c == 'n' {
						c = '\n'
					}
				}
				v.WriteByte(c)
			}
			s.labels[key] = v.String()
			line = strings.TrimPrefix(line, ",")
		}
		line = strings.TrimPrefix(line, "}")
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return s, strconv.ErrSyntax
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	s.value = v
	return s, err
}

// get sums the series of a name whose labels include the given pairs; a
// series never observed counts as 0.
func (sc scrape) get(name string, labels ...string) float64 {
	var sum float64
next:
	for _, s := range sc {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		sum += s.value
	}
	return sum
}

// has reports whether a metric family has any series (a histogram by its
// _count).
func (sc scrape) has(name string) bool {
	for _, s := range sc {
		if s.name == name || s.name == name+"_count" {
			return true
		}
	}
	return false
}

// moved checks how much one series grew between two scrapes.
func moved(t *testing.T, before, after scrape, want float64, name string, labels ...string) {
	t.Helper()
	if !after.has(name) {
		t.Errorf("%s is not exposed", name)
		return
	}
	if got := after.get(name, labels...) - before.get(name, labels...); got != want {
		t.Errorf("%s%v moved by %v, want %v", name, labels, got, want)
	}
}

// The counters are updated before a handler returns, so before the client
// reads the (small) answer: a scrape after an answer already shows it.
func TestMetrics(t *testing.T) {
	t.Parallel()

	t.Run("RequestsAndIdempotencyOutcomes", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		before := scrapeMetrics(t, e)

		wantStatus(t, create(e, "k-1", createBody("pedido-1", 2000)), http.StatusCreated)
		wantStatus(t, create(e, "k-1", createBody("pedido-1", 2000)), http.StatusCreated)
		wantStatus(t, create(e, "k-1", createBody("pedido-1", 2001)), http.StatusUnprocessableEntity)
		wantStatus(t, create(e, "", createBody("pedido-1", 2000)), http.StatusBadRequest)

		hold := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldAfterEffect, Times: 1})
		held := e.DoAsync(apitest.CreateRequest("k-2", createBody("pedido-2", 2000)))
		apitest.Recv(t, hold.Reached(), "the authorization to take effect at the provider")
		wantStatus(t, create(e, "k-2", createBody("pedido-2", 2000)), http.StatusConflict)
		hold.Release()
		wantStatus(t, apitest.Await(t, held, "the held create's answer"), http.StatusCreated)
		wantStatus(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/pay_nope"}), http.StatusNotFound)

		after := scrapeMetrics(t, e)
		moved(t, before, after, 3, "payments_http_requests_total", "route", "/v1/payments", "method", "POST", "status", "201")
		moved(t, before, after, 1, "payments_http_requests_total", "route", "/v1/payments", "method", "POST", "status", "422")
		moved(t, before, after, 1, "payments_http_requests_total", "route", "/v1/payments", "method", "POST", "status", "409")
		moved(t, before, after, 1, "payments_http_requests_total", "route", "/v1/payments", "method", "POST", "status", "400")
		moved(t, before, after, 1, "payments_http_requests_total", "route", "/v1/payments/{id}", "method", "GET", "status", "404")
		moved(t, before, after, 2, "payments_idempotency_outcomes_total", "operation", "payments.create", "outcome", "new")
		moved(t, before, after, 1, "payments_idempotency_outcomes_total", "operation", "payments.create", "outcome", "replayed")
		moved(t, before, after, 1, "payments_idempotency_outcomes_total", "operation", "payments.create", "outcome", "reused")
		moved(t, before, after, 1, "payments_idempotency_outcomes_total", "operation", "payments.create", "outcome", "in_use")
	})

	t.Run("ProviderCalls", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		before := scrapeMetrics(t, e)
		wantStatus(t, create(e, "k-1", createBody("pedido-1", 2000)), http.StatusCreated)
		wantStatus(t, create(e, "k-2", `{"order_id":"pedido-2","amount":2000,"currency":"BRL","payment_method":"pm_card_chargeDeclined"}`), http.StatusCreated)
		drop := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
		wantStatus(t, create(e, "k-3", createBody("pedido-3", 2000)), http.StatusAccepted)
		drop.Remove()
		after := scrapeMetrics(t, e)
		moved(t, before, after, 1, "payments_provider_calls_total", "provider", "stripe", "operation", "autorizar", "outcome", "succeeded")
		moved(t, before, after, 1, "payments_provider_calls_total", "provider", "stripe", "operation", "autorizar", "outcome", "declined")
		moved(t, before, after, 1, "payments_provider_calls_total", "provider", "stripe", "operation", "autorizar", "outcome", "unknown")
		moved(t, before, after, 3, "payments_provider_call_duration_seconds_count", "provider", "stripe", "operation", "autorizar")
		if !after.has("payments_provider_call_duration_seconds") ||
			after.get("payments_provider_call_duration_seconds_bucket", "provider", "stripe", "operation", "autorizar", "le", "+Inf") != 3 {
			t.Errorf("the provider call histogram has no +Inf bucket of 3")
		}
	})

	t.Run("PaymentsByStatus", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		before := scrapeMetrics(t, e)
		for _, st := range []string{"processing", "unknown", "requires_action", "pending", "authorized", "captured", "declined", "failed", "canceled"} {
			if !before.has("payments_by_status") || before.get("payments_by_status", "status", st) != 0 {
				t.Fatalf("a fresh database shows %v %s payments", before.get("payments_by_status", "status", st), st)
			}
		}
		wantStatus(t, create(e, "k-1", createBody("pedido-1", 2000)), http.StatusCreated)
		wantStatus(t, create(e, "k-2", `{"order_id":"pedido-2","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`), http.StatusCreated)
		r := create(e, "k-3", createBody("pedido-3", 2000))
		wantStatus(t, r, http.StatusCreated)
		wantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + r.JSON(t)["id"].(string) + "/cancel", Key: "k-c"}), http.StatusOK)
		after := scrapeMetrics(t, e)
		moved(t, before, after, 1, "payments_by_status", "status", "authorized")
		moved(t, before, after, 1, "payments_by_status", "status", "captured")
		moved(t, before, after, 1, "payments_by_status", "status", "canceled")
		moved(t, before, after, 0, "payments_by_status", "status", "processing")
	})

	t.Run("ReconcilerResolutions", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		drop := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
		wantStatus(t, create(e, "k-1", createBody("pedido-1", 2000)), http.StatusAccepted)
		drop.Remove()
		before := scrapeMetrics(t, e)
		if before.get("payments_by_status", "status", "unknown") != 1 {
			t.Fatalf("payments_by_status{unknown} = %v, want 1", before.get("payments_by_status", "status", "unknown"))
		}
		rec, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(), Accounts: e.Accounts, Metrics: e.Metrics, After: 0})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := rec.RunOnce(context.Background())
		if err != nil || sum.Resolved["authorized"] != 1 {
			t.Fatalf("RunOnce = %+v, %v; want one authorized", sum, err)
		}
		after := scrapeMetrics(t, e)
		moved(t, before, after, 1, "payments_reconciler_resolutions_total", "provider", "stripe", "status", "authorized")
		moved(t, before, after, 1, "payments_reconciler_examined_total", "provider", "stripe")
		moved(t, before, after, -1, "payments_by_status", "status", "unknown")
		moved(t, before, after, 1, "payments_by_status", "status", "authorized")
	})

	t.Run("WebhookDeliveries", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-1")
		before := scrapeMetrics(t, w.Env)
		payload := piSucceeded(piID, id, "manual")
		wantOutcome(t, w.deliver(t, payload), "applied")
		wantOutcome(t, w.deliver(t, payload), "duplicate")
		wantOutcome(t, w.deliver(t, piCapturable(piID, id)), "ignored")
		wantOutcome(t, w.deliver(t, intentEvent("evt_x", "payment_intent.succeeded",
			intentFields{id: "pi_x", status: "succeeded", captureMethod: "automatic", paymentID: "pay_x", amount: 1})), "unknown_object")
		wantStatus(t, w.post(w.acctID, payload, signWebhook(payload, "whsec_wrong", time.Now())), http.StatusBadRequest)
		after := scrapeMetrics(t, w.Env)
		for _, outcome := range []string{"applied", "duplicate", "ignored", "unknown_object", "rejected"} {
			moved(t, before, after, 1, "payments_webhook_deliveries_total", "provider", "stripe", "outcome", outcome)
		}
		moved(t, before, after, 0, "payments_webhook_deliveries_total", "provider", "mercadopago")
		moved(t, before, after, 4, "payments_http_requests_total", "route", "/webhooks/stripe/{account_id}", "status", "200")
		moved(t, before, after, 1, "payments_http_requests_total", "route", "/webhooks/stripe/{account_id}", "status", "400")
		moved(t, before, after, -1, "payments_by_status", "status", "authorized")
		moved(t, before, after, 1, "payments_by_status", "status", "captured")
	})
}

// TestMetricsExposedFromTheStart checks that a fresh instance already
// exposes every series of a known outcome at 0: Prometheus cannot see the
// first increase of a series that did not exist, so an alert on a rare
// outcome (a rejected webhook signature, a reconciler resolving to failed)
// would miss it.
func TestMetricsExposedFromTheStart(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	sc := scrapeMetrics(t, e)
	want := func(name string, labels ...string) {
		t.Helper()
		found := false
	next:
		for _, s := range sc {
			if s.name != name {
				continue
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if s.labels[labels[i]] != labels[i+1] {
					continue next
				}
			}
			found = true
		}
		if !found {
			t.Errorf("%s%v is not exposed", name, labels)
		}
	}
	for _, outcome := range []string{"new", "replayed", "in_use", "reused"} {
		want("payments_idempotency_outcomes_total", "operation", "payments.create", "outcome", outcome)
	}
	for _, prov := range []string{"stripe", "mercadopago"} {
		for _, outcome := range []string{"succeeded", "declined", "failed", "unknown"} {
			want("payments_provider_calls_total", "provider", prov, "operation", "autorizar", "outcome", outcome)
		}
		want("payments_provider_call_duration_seconds_count", "provider", prov, "operation", "autorizar")
		for _, st := range []string{"authorized", "captured", "declined", "failed", "canceled"} {
			want("payments_reconciler_resolutions_total", "provider", prov, "status", st)
		}
		for _, outcome := range []string{"applied", "duplicate", "ignored", "unknown_object", "rejected"} {
			want("payments_webhook_deliveries_total", "provider", prov, "outcome", outcome)
		}
		want("payments_reconciler_examined_total", "provider", prov)
		want("payments_reconciler_still_unknown", "provider", prov)
		want("payments_reconciler_attempts_needing_attention", "provider", prov)
	}
	for _, st := range []string{"authorized", "captured", "declined", "failed", "canceled"} {
		want("payments_by_status", "status", st)
	}
	for _, outcome := range []string{"succeeded", "retrying", "failed", "refused", "canceled"} {
		want("payments_webhook_endpoint_deliveries_total", "outcome", outcome)
	}
	want("payments_webhook_endpoint_oldest_pending_age_seconds")
	want("payments_webhook_endpoints_disabled", "reason", "failing")
	want("payments_webhook_endpoints_disabled", "reason", "merchant")
	wantStatus(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/healthz"}), http.StatusOK)
	sc = scrapeMetrics(t, e)
	want("payments_http_requests_total", "route", "/healthz", "method", "GET", "status", "200")
}

// The backlog counts the events of accounts whose consumer reads the feed:
// a merchant that never polls has no consumer to fall behind.
func TestMetricsEventBacklog(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	wantStatus(t, create(e, "k-backlog", createBody("pedido-backlog", 100)), http.StatusCreated)
	if got := scrapeMetrics(t, e).get("payments_events_backlog"); got != 0 {
		t.Fatalf("backlog = %v, want 0 while no consumer reads the feed", got)
	}
	first := eventsPage(t, e, "", "", 100)
	next := eventsPage(t, e, "", first.cursor(t), 100)
	if got := scrapeMetrics(t, e).get("payments_events_backlog"); got != 0 {
		t.Fatalf("backlog = %v after the cursor came back, want 0", got)
	}
	// Now the account has a consumer: what it has not fetched is its backlog.
	wantStatus(t, create(e, "k-backlog-2", createBody("pedido-backlog-2", 100)), http.StatusCreated)
	if got := scrapeMetrics(t, e).get("payments_events_backlog"); got != 2 {
		t.Fatalf("backlog = %v, want 2 (processing, authorized) behind an active consumer", got)
	}
	// Fetching is not processing: the backlog shrinks when the consumer
	// passes the cursor back.
	second := eventsPage(t, e, "", next.cursor(t), 100)
	if got := scrapeMetrics(t, e).get("payments_events_backlog"); got != 2 {
		t.Fatalf("backlog = %v after a fetch, want 2", got)
	}
	eventsPage(t, e, "", second.cursor(t), 100)
	sc := scrapeMetrics(t, e)
	if got := sc.get("payments_events_backlog"); got != 0 {
		t.Fatalf("backlog = %v after the cursor came back, want 0", got)
	}
	if got := sc.get("payments_events_backlog_age_seconds"); got != 0 {
		t.Fatalf("backlog age = %v with nothing unread, want 0", got)
	}
}

// TestMetricsWhileDatabaseDown: with PostgreSQL unreachable /metrics still
// answers 200 with the process series and the last known database-derived
// values, and says how old they are. It used to answer 500 with nothing.
func TestMetricsWhileDatabaseDown(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	wantStatus(t, create(e, "k-1", createBody("pedido-1", 2000)), http.StatusCreated)
	before := scrapeMetrics(t, e)
	if got := before.get("payments_by_status", "status", "authorized"); got != 1 {
		t.Fatalf("payments_by_status{authorized} = %v, want 1", got)
	}
	if before.get("payments_database_gauges_refreshed_timestamp_seconds") == 0 {
		t.Fatal("no refresh time after a refresh")
	}

	// Make the test database unreachable: refuse new connections and end
	// the open ones, as an outage does.
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	dbName := databaseName(t, e.DBURL)
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{dbName}.Sanitize()+` ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `ALTER DATABASE `+pgx.Identifier{dbName}.Sanitize()+` ALLOW_CONNECTIONS true`)
	})
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, dbName); err != nil {
		t.Fatal(err)
	}
	if err := e.Metrics.RefreshDatabase(ctx); err == nil {
		t.Fatal("the database gauges refreshed with the database unreachable")
	}

	down := scrapeOnly(t, e) // fails the test unless 200
	for _, name := range []string{"process_resident_memory_bytes", "go_goroutines", "payments_http_requests_total",
		"payments_database_gauges_age_seconds"} {
		if !down.has(name) {
			t.Errorf("no %s while the database is down", name)
		}
	}
	if got := down.get("payments_by_status", "status", "authorized"); got != 1 {
		t.Errorf("payments_by_status{authorized} = %v while down, want the last known 1", got)
	}
	if got := down.get("payments_database_gauges_refresh_failures_total"); got < 1 {
		t.Errorf("refresh failures = %v, want at least 1", got)
	}
	if down.get("payments_database_gauges_refreshed_timestamp_seconds") != before.get("payments_database_gauges_refreshed_timestamp_seconds") {
		t.Error("the refresh time moved without a refresh")
	}
}

// serverURL is the PostgreSQL server the test databases live on.
func serverURL(t *testing.T) string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return postgrestest.DefaultURL
}

func databaseName(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}
