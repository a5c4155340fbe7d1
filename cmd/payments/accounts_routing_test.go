package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

// accounts routing prints an account's routing (its providers in order
// while none is set), sets one from a file and prints it as stored, and
// refuses one naming a provider the account has no credentials for.
func TestAccountsRouting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	getenv := env("DATABASE_URL", postgrestest.URL(t), "STRIPE_API_BASE", simURL())
	run1 := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, args, getenv, &stdout, &stderr)
		return stdout.String(), err
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := run1(args...)
		if err != nil {
			t.Fatalf("payments %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	var created struct {
		ID string `json:"id"`
	}
	out := cli("accounts", "create", "--name", "Loja Rota", "--stripe-key", "sk_test_cli_routing", "--mercadopago-access-token", "TEST-cli-routing-1")
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.ID == "" {
		t.Fatalf("create printed %q", out)
	}
	if out := cli("accounts", "routing", "--account", created.ID); out != `{"rules":[],"default":["stripe","mercadopago"]}`+"\n" {
		t.Fatalf("routing before any is set: %q", out)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "routing.json")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"rules":[{"match":{"payment_method":"boleto","currency":"brl"},"providers":["mercadopago"]}],"default":["stripe","mercadopago"]}`)
	want := `{"rules":[{"match":{"payment_method":"boleto","currency":"BRL"},"providers":["mercadopago"]}],"default":["stripe","mercadopago"]}` + "\n"
	if out := cli("accounts", "routing", "--account", created.ID, "--file", file); out != want {
		t.Fatalf("set printed %q, want %q", out, want)
	}
	if out := cli("accounts", "routing", "--account", created.ID); out != want {
		t.Fatalf("routing after set: %q, want %q", out, want)
	}

	other := cli("accounts", "create", "--name", "Loja Stripe", "--stripe-key", "sk_test_cli_routing_2")
	if err := json.Unmarshal([]byte(other), &created); err != nil {
		t.Fatal(err)
	}
	write(`{"default":["mercadopago"]}`)
	if _, err := run1("accounts", "routing", "--account", created.ID, "--file", file); err == nil ||
		!strings.Contains(err.Error(), "default.0 is a provider the account has no credentials for") {
		t.Fatalf("a provider without credentials: %v", err)
	}
	if _, err := run1("accounts", "routing", "--account", "acct_missing"); err == nil || !strings.Contains(err.Error(), "acct_missing") {
		t.Fatalf("an unknown account: %v", err)
	}
}

// A file that is not a routing is refused before anything is opened,
// naming what is wrong.
func TestAccountsRoutingRefusesFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"default":["stripe"],"weights":[1]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--file", bad}, "missing --account"},
		{[]string{"--account", "acct_x", "--file", filepath.Join(dir, "none.json")}, "--file"},
		{[]string{"--account", "acct_x", "--file", bad}, "weights"},
	} {
		err := run(context.Background(), append([]string{"accounts", "routing"}, c.args...),
			env("DATABASE_URL", "postgres://127.0.0.1:1/none"), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want one naming %s", c.args, err, c.want)
		}
	}
}
