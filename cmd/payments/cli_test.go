package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/buildinfo"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

// runBinary runs the real binary with exactly env and returns its exit
// status and output.
func runBinary(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("payments %s: %v", strings.Join(args, " "), err)
	return 0, "", ""
}

func TestHelp(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the real binary; skipped in -short")
	}
	bin := buildBinary(t, "")
	var invocations [][]string
	invocations = append(invocations, []string{"--help"}, []string{"-h"}, []string{"help"})
	for _, c := range commands {
		words := strings.Fields(c.name)
		invocations = append(invocations, slices.Concat(words, []string{"--help"}),
			slices.Concat([]string{"help"}, words), slices.Concat(words, []string{"-h"}))
	}
	for g := range groups {
		invocations = append(invocations, []string{g, "--help"})
	}
	// Help wins over other flags, as in every CLI.
	invocations = append(invocations, []string{"reconcile", "--once", "--help"},
		[]string{"accounts", "rotate-api-key", "--account", "acct_x", "--help"})

	// No settings at all, and settings that would make serve try to start:
	// either way help exits 0 and reads nothing.
	envs := map[string][]string{
		"NoEnvironment": {},
		"FullEnvironment": {"DATABASE_URL=postgres://postgres@127.0.0.1:1/none?connect_timeout=1",
			"ENCRYPTION_KEY=" + base64.StdEncoding.EncodeToString(apitest.EncryptionKey), "HTTP_ADDR=" + freeAddr(t)},
	}
	for name, env := range envs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, args := range invocations {
				code, stdout, stderr := runBinary(t, bin, env, args...)
				if code != 0 || !strings.HasPrefix(stdout, "usage: payments") || stderr != "" {
					t.Errorf("payments %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
				}
			}
		})
	}

	t.Run("MistakesExitTwoAndNameTheFlag", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := runBinary(t, bin, nil, "accounts", "create", "--name", "Loja")
		if code != 2 || stdout != "" || stderr != "payments: accounts create: missing --stripe-key (usage: payments accounts create --name N --stripe-key K [--webhook-secret S])\n" {
			t.Fatalf("exit %d\nstdout: %q\nstderr: %q", code, stdout, stderr)
		}
		// A command that could not run is not a usage mistake.
		if code, _, stderr := runBinary(t, bin, nil, "migrate"); code != 1 || !strings.Contains(stderr, "DATABASE_URL is required") {
			t.Fatalf("migrate with no settings: exit %d, %q", code, stderr)
		}
	})

	t.Run("EachCommandHasItsOwnUsage", func(t *testing.T) {
		t.Parallel()
		_, top, _ := runBinary(t, bin, nil, "--help")
		for _, c := range commands {
			if !strings.Contains(top, "  "+c.name) {
				t.Errorf("payments --help does not list %q:\n%s", c.name, top)
			}
			_, out, _ := runBinary(t, bin, nil, append(strings.Fields(c.name), "--help")...)
			if first := strings.SplitN(out, "\n", 2)[0]; !strings.HasPrefix(first, "usage: payments "+c.name) {
				t.Errorf("payments %s --help starts %q", c.name, first)
			}
		}
	})
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		args []string
		want []string // in the error
	}{
		{nil, []string{"a command is required"}},
		{[]string{"bogus"}, []string{`unknown command "bogus"`}},
		{[]string{"accounts"}, []string{"a command is required"}},
		{[]string{"accounts", "delete"}, []string{`unknown command "accounts delete"`}},
		{[]string{"accounts", "create"}, []string{"missing --name, --stripe-key"}},
		{[]string{"accounts", "create", "--name", "Loja"}, []string{"missing --stripe-key"}},
		{[]string{"accounts", "create", "--name", "Loja", "--stripe-key"}, []string{"flag needs an argument", "-stripe-key"}},
		{[]string{"accounts", "rotate-api-key"}, []string{"missing --account"}},
		{[]string{"accounts", "rotate-api-key", "--account", "acct_1", "--grace", "soon"}, []string{"-grace"}},
		{[]string{"accounts", "rotate-api-key", "--account", "acct_1", "--grace", "-1h"}, []string{"--grace must not be negative"}},
		{[]string{"accounts", "list", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"serve", "now"}, []string{`serve takes no arguments, got "now"`}},
		{[]string{"migrate", "--up"}, []string{"migrate takes no arguments"}},
		{[]string{"version", "--json"}, []string{"version takes no arguments"}},
		{[]string{"healthcheck", "--url", "localhost:8080"}, []string{"--url must be an http(s) URL"}},
		{[]string{"healthcheck", "--wait"}, []string{"flag provided but not defined: -wait"}},
		{[]string{"webhooks"}, []string{"a command is required"}},
		{[]string{"webhooks", "forward"}, []string{`unknown command "webhooks forward"`}},
		{[]string{"webhooks", "listen"}, []string{"--secret or WEBHOOK_SECRET is required"}},
		{[]string{"webhooks", "listen", "--secret", "whsec_not*base64"}, []string{"not a whsec_… signing secret"}},
		{[]string{"webhooks", "listen", "--register"}, []string{"--register needs --api-key or PAYMENTS_API_KEY"}},
		{[]string{"webhooks", "listen", "--register", "--api-key", "k", "--secret", "whsec_x"}, []string{"drop --secret"}},
		{[]string{"webhooks", "listen", "--register", "--api-key", "k", "--api-url", "localhost:8080"}, []string{"--api-url must be an http(s) URL"}},
		{[]string{"webhooks", "listen", "--secret", "whsec_x", "now"}, []string{`unexpected argument "now"`}},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tc.args, noEnv, &stdout, &stderr)
		if err == nil || !isUsageError(err) {
			t.Errorf("payments %s: err %v, want a usage error", strings.Join(tc.args, " "), err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("payments %s: err %q, want it to say %q", strings.Join(tc.args, " "), err, w)
			}
		}
		// A flag mistake is named before any setting is missed.
		if strings.Contains(err.Error(), "DATABASE_URL") || stdout.Len() != 0 {
			t.Errorf("payments %s: err %q, stdout %q", strings.Join(tc.args, " "), err, stdout.String())
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "payments ") || !strings.Contains(out.String(), runtime.Version()) {
		t.Fatalf("version = %q", out.String())
	}
	got := versionLine(buildinfo.Info{Version: "v1.4.0", Revision: "9955798abc", Modified: true, Time: "2026-12-03T06:00:00Z", GoVersion: "go1.26.8"})
	want := "payments v1.4.0 commit 9955798abc (modified) of 2026-12-03T06:00:00Z go1.26.8 " + runtime.GOOS + "/" + runtime.GOARCH
	if got != want {
		t.Fatalf("versionLine = %q, want %q", got, want)
	}
}

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("URLFromHTTPAddr", func(t *testing.T) {
		t.Parallel()
		for addr, want := range map[string]string{
			"":               "http://127.0.0.1:8080/readyz",
			":9000":          "http://127.0.0.1:9000/readyz",
			"0.0.0.0:9000":   "http://127.0.0.1:9000/readyz",
			"[::]:9000":      "http://[::1]:9000/readyz",
			"10.0.0.7:9000":  "http://10.0.0.7:9000/readyz",
			"localhost:9000": "http://localhost:9000/readyz",
		} {
			if got, err := healthcheckURL("", addr); err != nil || got != want {
				t.Errorf("HTTP_ADDR=%q: %q, %v; want %q", addr, got, err, want)
			}
		}
		if got, _ := healthcheckURL("http://payments:8080", ":1"); got != "http://payments:8080/readyz" {
			t.Errorf("--url without a path: %q", got)
		}
		if _, err := healthcheckURL("", "8080"); err == nil || !strings.Contains(err.Error(), "HTTP_ADDR") {
			t.Errorf("HTTP_ADDR=8080: err %v, want one naming HTTP_ADDR", err)
		}
	})

	t.Run("ExitsZeroOnlyWhenReady", func(t *testing.T) {
		t.Parallel()
		var ready atomic.Bool
		ready.Store(true)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/readyz" || !ready.Load() {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
			}
		}))
		defer srv.Close()
		addr := strings.TrimPrefix(srv.URL, "http://")
		var out bytes.Buffer
		if err := run(ctx, []string{"healthcheck"}, env("HTTP_ADDR", addr), &out, &out); err != nil {
			t.Fatalf("ready server via HTTP_ADDR: %v", err)
		}
		if err := run(ctx, []string{"healthcheck", "--url", srv.URL}, func(string) string { return "" }, &out, &out); err != nil {
			t.Fatalf("ready server via --url: %v", err)
		}
		ready.Store(false)
		err := run(ctx, []string{"healthcheck", "--url", srv.URL}, func(string) string { return "" }, &out, &out)
		if err == nil || !strings.Contains(err.Error(), "503") {
			t.Fatalf("server answering 503: %v, want an error naming 503", err)
		}
	})

	t.Run("RealBinaryAgainstLiveAndDeadServer", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("builds and runs the real binary; skipped in -short")
		}
		bin := buildBinary(t, "")
		e := apitest.New(t, apitest.Options{})
		p := start(t, e, bin)
		live := strings.TrimPrefix(p.url, "http://")
		if code, out, errOut := runBinary(t, bin, []string{"HTTP_ADDR=" + live}, "healthcheck"); code != 0 {
			t.Fatalf("live server: exit %d\n%s%s", code, out, errOut)
		}
		if code, _, _ := runBinary(t, bin, nil, "healthcheck", "--url", p.url); code != 0 {
			t.Fatalf("live server via --url: exit %d", code)
		}
		dead := freeAddr(t)
		code, _, errOut := runBinary(t, bin, []string{"HTTP_ADDR=" + dead}, "healthcheck", "--timeout", "2s")
		if code != 1 || !strings.Contains(errOut, "not ready") {
			t.Fatalf("dead server: exit %d, stderr %q; want 1 and a line saying not ready", code, errOut)
		}
	})
}

// The accounts commands end to end: create, list without secrets, rotate;
// the old key works in its grace period and not after it.
func TestAccountsCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := postgrestest.URL(t)
	getenv := env("DATABASE_URL", dbURL, "STRIPE_API_BASE", simURL())
	cli := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if err := run(ctx, args, getenv, &stdout, &stderr); err != nil {
			t.Fatalf("payments %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String()
	}
	var created struct{ ID, APIKey string }
	out := cli("accounts", "create", "--name", "Loja Um", "--stripe-key", "sk_test_cli_secret", "--webhook-secret", "whsec_cli_secret")
	if err := json.Unmarshal([]byte(out), &struct {
		ID     *string `json:"id"`
		APIKey *string `json:"api_key"`
	}{&created.ID, &created.APIKey}); err != nil || created.APIKey == "" {
		t.Fatalf("create printed %q", out)
	}

	out = cli("accounts", "rotate-api-key", "--account", created.ID, "--grace", "2h")
	var rotated struct {
		ID         string    `json:"id"`
		APIKey     string    `json:"api_key"`
		ValidUntil time.Time `json:"previous_api_key_valid_until"`
	}
	if err := json.Unmarshal([]byte(out), &rotated); err != nil || rotated.ID != created.ID || rotated.APIKey == "" || rotated.APIKey == created.APIKey {
		t.Fatalf("rotate printed %q", out)
	}
	if d := time.Until(rotated.ValidUntil); d < 119*time.Minute || d > 2*time.Hour {
		t.Fatalf("old key valid until %v, want 2h from now", rotated.ValidUntil)
	}

	list := cli("accounts", "list")
	for _, secret := range []string{created.APIKey, rotated.APIKey, "sk_test_cli", "whsec_cli"} {
		if strings.Contains(list, secret) {
			t.Fatalf("accounts list prints a secret:\n%s", list)
		}
	}
	if !strings.Contains(list, `"id":"`+created.ID+`"`) || !strings.Contains(list, `"name":"Loja Um"`) ||
		!strings.Contains(list, `"previous_api_key_valid_until"`) || strings.Count(list, "\n") != 1 {
		t.Fatalf("accounts list:\n%s", list)
	}

	// What the API will accept, seen by a service whose clock can move.
	db, err := postgres.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var clock apitest.Clock
	s, err := account.NewService(postgres.NewAccountStore(db), apitest.EncryptionKey, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	for name, k := range map[string]string{"old": created.APIKey, "new": rotated.APIKey} {
		if a, err := s.Authenticate(ctx, k); err != nil || a.ID != created.ID {
			t.Fatalf("%s key in the grace period: %v", name, err)
		}
	}
	clock.Advance(2*time.Hour + time.Second)
	if _, err := s.Authenticate(ctx, created.APIKey); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("old key after the grace period: %v, want not found", err)
	}
	if _, err := s.Authenticate(ctx, rotated.APIKey); err != nil {
		t.Fatalf("new key after the grace period: %v", err)
	}

	var stderr bytes.Buffer
	err = run(ctx, []string{"accounts", "rotate-api-key", "--account", "acct_missing"}, getenv, &stderr, &stderr)
	if err == nil || !strings.Contains(err.Error(), "acct_missing") || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("rotating an unknown account: %v", err)
	}
}
