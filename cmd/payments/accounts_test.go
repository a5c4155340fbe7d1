package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// A malformed secret is refused before anything is opened, and the error
// names the flag, never the secret.
func TestAccountsCreateRefusesMalformedSecrets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--stripe-key", "sk_test_secretpart "}, "--stripe-key"},
		{[]string{"--stripe-key", "sk_test_secretpart\n"}, "--stripe-key"},
		{[]string{"--stripe-key", "pk_test_secretpart"}, "--stripe-key"},
		{[]string{"--stripe-key", "sk_test_ok", "--webhook-secret", "whsec_secretpart\t"}, "--webhook-secret"},
	} {
		// An unreachable database: validation must come first.
		err := run(context.Background(), append([]string{"accounts", "create", "--name", "Loja"}, c.args...),
			env("DATABASE_URL", "postgres://127.0.0.1:1/none"), io.Discard, io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), c.flag+" ") || strings.Contains(err.Error(), "secretpart") {
			t.Errorf("%q: err %v, want one naming %s without the secret", c.args, err, c.flag)
		}
	}
}
