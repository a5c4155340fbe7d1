package providersim

import (
	"errors"
	"net/http"
	"testing"

	stripe "github.com/stripe/stripe-go/v76"
)

// GET /v1/account answers the account a key belongs to: the secret key and
// the restricted keys of one account share its id, other accounts differ,
// and a revoked key gets 401 as at Stripe.
func TestAccountOfKey(t *testing.T) {
	t.Parallel()
	e := start(t, Options{})
	ids := map[string]string{}
	for _, key := range []string{"sk_test_family_one", "rk_test_family_one", "sk_live_family_one", "rk_live_family_one", "sk_test_family_two"} {
		a, err := e.client(key).Accounts.Get()
		if err != nil {
			t.Fatalf("GET /v1/account with %s: %v", key[:8], err)
		}
		if a.ID == "" || a.ID != AccountOf(key) {
			t.Fatalf("GET /v1/account with %s: id %q, want %q", key[:8], a.ID, AccountOf(key))
		}
		ids[key] = a.ID
	}
	for _, key := range []string{"rk_test_family_one", "sk_live_family_one", "rk_live_family_one"} {
		if ids[key] != ids["sk_test_family_one"] {
			t.Errorf("%s… of one account answers %s, the secret key %s", key[:8], ids[key], ids["sk_test_family_one"])
		}
	}
	if ids["sk_test_family_two"] == ids["sk_test_family_one"] {
		t.Errorf("two accounts share the id %s", ids["sk_test_family_one"])
	}
	// The same answer on every call, and one request each.
	again, err := e.client("sk_test_family_one").Accounts.Get()
	if err != nil || again.ID != ids["sk_test_family_one"] {
		t.Errorf("second GET /v1/account: %v, %v", again, err)
	}
	var asked int
	for _, r := range e.sim.Requests() {
		if r.Op == "account" && r.Method == http.MethodGet && r.Path == "/v1/account" {
			asked++
		}
	}
	if asked != 6 {
		t.Errorf("%d account requests logged, want 6", asked)
	}

	e.sim.RevokeSecret("sk_test_family_two")
	_, err = e.client("sk_test_family_two").Accounts.Get()
	var se *stripe.Error
	if !errors.As(err, &se) || se.HTTPStatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/account with a revoked key: %v, want 401", err)
	}
}
