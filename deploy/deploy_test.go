// Package deploy holds the alerting rules and the dashboard that ship with
// the service; its tests keep them naming only metrics the service exports.
package deploy

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"
)

// exportedMetrics is every series name a running instance exports, from
// its own registry: the service's collectors, the database pool's and the
// process's, after the activity that gives each labelled metric a series
// (a request, a transition, a circuit change, a delivery still pending).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
	// A merchant endpoint nobody answers: its delivery stays pending.
	apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: "k-endpoint",
		Body: `{"url":"http://127.0.0.1:9/hook","enabled_events":["*"]}`}), http.StatusCreated)
	apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-pay",
		Body: `{"order_id":"pedido-1","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`}), http.StatusCreated)
	m := e.Metrics
	m.PaymentTransition("stripe", payment.StatusProcessing, payment.StatusCaptured)
	m.ProviderCall("stripe", payment.OpAuthorize, provider.Succeeded, time.Millisecond)
	m.CircuitState("stripe", "closed")
	if err := m.RefreshDatabase(context.Background()); err != nil {
		t.Fatal(err)
	}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+suffix] = true
			}
		}
	}
	for _, want := range []string{"payments_build_info", "payments_db_seconds_since_last_write",
		"payments_webhook_endpoint_oldest_pending_age_by_endpoint_seconds", "payments_discrepancies_open"} {
		if !names[want] {
			t.Fatalf("the instance does not export %s: the activity above no longer makes every series", want)
		}
	}
	return names
}

var (
	stringRe = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	// metricRe matches the service's and the Go client's metric names;
	// PromQL functions and keywords never start with these prefixes.
	metricRe = regexp.MustCompile(`\b(?:payments|go|process)_[a-zA-Z0-9_:]*`)
)

// metricsIn lists the metric names a PromQL expression reads; label
// values, in quotes, are left out.
func metricsIn(expr string) []string {
	return metricRe.FindAllString(stringRe.ReplaceAllString(expr, `""`), -1)
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func alertRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var rules []rule
	for _, g := range doc.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("no rules in prometheus/alerts.yml")
	}
	return rules
}

// runbookAnchors are the GitHub anchors of docs/runbooks.md's headings.
func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		slug := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
				return r
			}
			return -1
		}, title)
		anchors[slug] = true
	}
	return anchors
}

// Every alert reads only metrics the service exports, has a severity, and
// links a section of docs/runbooks.md that exists.
func TestAlerts(t *testing.T) {
	t.Parallel()
	exported := exportedMetrics(t)
	anchors := runbookAnchors(t)
	const runbooks = "https://github.com/acmepay/payments/blob/main/docs/runbooks.md#"
	for _, r := range alertRules(t) {
		names := metricsIn(r.Expr)
		if len(names) == 0 {
			t.Errorf("%s: expr %q names no metric of the service", r.Alert, r.Expr)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s: %s is not a metric the service exports", r.Alert, n)
			}
		}
		if !slices.Contains([]string{"page", "ticket"}, r.Labels["severity"]) {
			t.Errorf("%s: severity %q, want page or ticket", r.Alert, r.Labels["severity"])
		}
		anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbooks)
		if !ok || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q is not a heading of docs/runbooks.md", r.Alert, r.Annotations["runbook_url"])
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: needs a summary and a description", r.Alert)
		}
	}
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// Every panel of the dashboard queries only metrics the service exports.
func TestDashboard(t *testing.T) {
	t.Parallel()
	exported := exportedMetrics(t)
	b, err := os.ReadFile("grafana/payments.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string  `json:"title"`
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.Title == "" || dash.UID == "" {
		t.Fatalf("dashboard title %q uid %q: both are needed to import it", dash.Title, dash.UID)
	}
	var all []panel
	for _, p := range dash.Panels {
		all = append(append(all, p), p.Panels...)
	}
	queried := 0
	for _, p := range all {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			names := metricsIn(target.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: %q names no metric of the service", p.Title, target.Expr)
			}
			for _, n := range names {
				if !exported[n] {
					t.Errorf("panel %q: %s is not a metric the service exports", p.Title, n)
				}
			}
			queried++
		}
	}
	if queried == 0 {
		t.Fatal("the dashboard queries nothing")
	}
}

// The name extraction itself: a broken one would pass every check above.
func TestMetricsIn(t *testing.T) {
	t.Parallel()
	got := metricsIn(`sum by (provider) (rate(payments_provider_calls_total{outcome="payments_fake"}[5m])) / ` +
		`histogram_quantile(0.99, rate(payments_http_request_duration_seconds_bucket[5m])) and go_goroutines`)
	want := []string{"payments_provider_calls_total", "payments_http_request_duration_seconds_bucket", "go_goroutines"}
	if !slices.Equal(got, want) {
		t.Fatalf("metricsIn = %q, want %q", got, want)
	}
}
