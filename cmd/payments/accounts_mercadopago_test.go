package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

// accounts create takes Mercado Pago's credentials beside Stripe's or
// instead of them; list shows the providers in order, never the secrets.
func TestAccountsCreateMercadoPago(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	getenv := env("DATABASE_URL", postgrestest.URL(t), "STRIPE_API_BASE", simURL())
	cli := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if err := run(ctx, args, getenv, &stdout, &stderr); err != nil {
			t.Fatalf("payments %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String()
	}
	const token, secret = "TEST-cli-mp-token-1", "clismpsecret1"
	cli("accounts", "create", "--name", "Loja MP", "--mercadopago-access-token", token, "--mercadopago-webhook-secret", secret)
	cli("accounts", "create", "--name", "Loja Dupla", "--stripe-key", "sk_test_cli_mp_both", "--mercadopago-access-token", "TEST-cli-mp-token-2")
	list := cli("accounts", "list")
	for _, s := range []string{token, secret, "sk_test_cli_mp_both", "TEST-cli-mp-token-2"} {
		if strings.Contains(list, s) {
			t.Fatalf("accounts list prints a secret:\n%s", list)
		}
	}
	if !strings.Contains(list, `"name":"Loja MP"`) || !strings.Contains(list, `"providers":["mercadopago"]`) ||
		!strings.Contains(list, `"providers":["stripe","mercadopago"]`) {
		t.Fatalf("accounts list:\n%s", list)
	}
}

// A malformed Mercado Pago credential is refused before anything is
// opened, naming the flag and never the secret; with no provider at all,
// --stripe-key is what is missing.
func TestAccountsCreateMercadoPagoRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mercadopago-access-token", "TEST-secretpart "}, "--mercadopago-access-token "},
		{[]string{"--mercadopago-access-token", "sk_test_secretpart"}, "--mercadopago-access-token "},
		{[]string{"--mercadopago-webhook-secret", "secretpart"}, "--stripe-key"},
		{[]string{"--mercadopago-access-token", "TEST-ok", "--mercadopago-webhook-secret", "secret part"}, "--mercadopago-webhook-secret "},
		{[]string{"--mercadopago-access-token", "TEST-ok", "--webhook-secret", "whsec_secretpart"}, "--stripe-key "},
	} {
		err := run(context.Background(), append([]string{"accounts", "create", "--name", "Loja"}, c.args...),
			env("DATABASE_URL", "postgres://127.0.0.1:1/none"), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secretpart") {
			t.Errorf("%q: err %v, want one naming %s without the secret", c.args, err, c.want)
		}
	}
}
