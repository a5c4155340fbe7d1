package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// A guessable admin token stops start-up, before anything is opened.
func TestServeRefusesShortAdminToken(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"s3cr3t", strings.Repeat("q", 31)} {
		var stderr bytes.Buffer
		err := run(context.Background(), []string{"serve"}, env("ADMIN_TOKEN", token), io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), "ADMIN_TOKEN") || strings.Contains(err.Error(), "\n") ||
			strings.Contains(err.Error(), token) {
			t.Errorf("ADMIN_TOKEN of %d characters: err %v, want one line naming ADMIN_TOKEN (and not the token)", len(token), err)
		}
	}
	for _, token := range []string{"", strings.Repeat("x", 32)} {
		if _, err := loadConfig(env("ADMIN_TOKEN", token)); err != nil {
			t.Errorf("ADMIN_TOKEN of %d characters: %v", len(token), err)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// With METRICS_ADDR, /metrics is served there, alone, and no longer on the
// public address.
func TestMetricsAddrServesMetricsOnlyThere(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	metricsAddr := freeAddr(t)
	p := start(t, e, buildBinary(t, ""), "METRICS_ADDR="+metricsAddr)
	if status, body := get(t, p.url+"/metrics"); status != http.StatusNotFound || strings.Contains(body, "payments_") {
		t.Fatalf("public /metrics = %d, want 404 without metrics", status)
	}
	status, body := get(t, "http://"+metricsAddr+"/metrics")
	if status != http.StatusOK || !strings.Contains(body, "payments_http_requests_total") {
		t.Fatalf("METRICS_ADDR /metrics = %d, want 200 with payments_http_requests_total:\n%.500s", status, body)
	}
	for _, path := range []string{"/healthz", "/v1/payments", "/admin/v1/payments", "/console/sign-in"} {
		if status, _ := get(t, "http://"+metricsAddr+path); status != http.StatusNotFound {
			t.Errorf("METRICS_ADDR %s = %d, want 404", path, status)
		}
	}
}

func TestLoadConfigTrustedProxies(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env("TRUSTED_PROXY_CIDRS", "10.0.0.0/8, 192.0.2.7,2001:db8::/32"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.TrustedProxies); got != "[10.0.0.0/8 192.0.2.7/32 2001:db8::/32]" {
		t.Fatalf("TRUSTED_PROXY_CIDRS = %s", got)
	}
	if c, _ := loadConfig(env()); len(c.TrustedProxies) != 0 || c.MetricsAddr != "" {
		t.Fatalf("defaults: %v, %q; want no trusted proxy and no METRICS_ADDR", c.TrustedProxies, c.MetricsAddr)
	}
	for _, bad := range [][]string{{"TRUSTED_PROXY_CIDRS", "10.0.0.0/33"}, {"TRUSTED_PROXY_CIDRS", "proxy.local"},
		{"METRICS_ADDR", ":8080"}} {
		if _, err := loadConfig(env(bad...)); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%s: err %v, want one naming the setting", bad[0], bad[1], err)
		}
	}
}
