package api_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// A secret key and a restricted key of one Stripe account are different
// strings: the service asks the provider which account each belongs to
// (GET /v1/account) and registers each provider account once. A key the
// provider refuses is 400; a provider that cannot be asked is 503.
func TestAdminAccountsOneStripeAccountOneAccount(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	ctx := context.Background()
	post := func(name, secret string) *apitest.Response {
		return e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts", Bearer: apitest.AdminToken,
			Body: `{"name":"` + name + `","stripe_secret_key":"` + secret + `"}`})
	}
	accounts := func() int {
		t.Helper()
		var n int
		if err := e.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM accounts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	asked := func(secret string) int {
		n := 0
		for _, r := range e.Sim.Requests() {
			if r.Op == "account" && r.SecretKey == secret {
				n++
			}
		}
		return n
	}

	wantStatus(t, post("Loja Live", "sk_live_family_one"), http.StatusCreated)
	var stored string
	if err := e.DB.Pool.QueryRow(ctx, `SELECT stripe_account_id FROM accounts WHERE name = 'Loja Live'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != providersim.AccountOf("sk_live_family_one") {
		t.Fatalf("stored provider account %q, want %q", stored, providersim.AccountOf("sk_live_family_one"))
	}
	// The restricted key of the same account: refused, nothing stored.
	before := accounts()
	dup := post("Copia", "rk_live_family_one")
	if dup.Status != http.StatusConflict || dup.Code(t) != "provider_credentials_in_use" {
		t.Fatalf("restricted key of a registered account: %d %s, want 409 provider_credentials_in_use", dup.Status, dup.Body)
	}
	if n := accounts(); n != before {
		t.Fatalf("%d accounts after the refusal, want %d", n, before)
	}
	if asked("rk_live_family_one") != 1 {
		t.Fatalf("the provider was asked %d times about the restricted key, want 1", asked("rk_live_family_one"))
	}

	// Both keys of another account at once: exactly one registers.
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i, secret := range []string{"sk_test_family_two", "rk_test_family_two"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.TryDo(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts", Bearer: apitest.AdminToken,
				Body: `{"name":"Loja Dois","stripe_secret_key":"` + secret + `"}`})
			if err == nil {
				statuses[i] = r.Status
			}
		}()
	}
	wg.Wait()
	if !(statuses[0] == http.StatusCreated && statuses[1] == http.StatusConflict) && !(statuses[1] == http.StatusCreated && statuses[0] == http.StatusConflict) {
		t.Fatalf("two keys of one account at once: %v, want one 201 and one 409", statuses)
	}
	var two int
	if err := e.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM accounts WHERE stripe_account_id = $1`,
		providersim.AccountOf("sk_test_family_two")).Scan(&two); err != nil || two != 1 {
		t.Fatalf("%d accounts for one provider account (%v), want 1", two, err)
	}

	// A key the provider refuses: 400 naming the field.
	e.Sim.RevokeSecret("sk_test_family_revoked")
	before = accounts()
	refused := post("Loja Revogada", "sk_test_family_revoked")
	if refused.Status != http.StatusBadRequest || refused.Code(t) != "invalid_request" {
		t.Fatalf("a key the provider refuses: %d %s, want 400 invalid_request", refused.Status, refused.Body)
	}
	if errs, _ := refused.JSON(t)["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "stripe_secret_key" {
		t.Fatalf("errors %s, want one naming stripe_secret_key", refused.Body)
	}
	// A provider that cannot be asked: 503, nothing stored; it registers
	// once the provider answers.
	f := e.Sim.Inject(providersim.Fault{Op: "account", Kind: providersim.Error500BeforeEffect})
	down := post("Loja Tres", "sk_test_family_three")
	if down.Status != http.StatusServiceUnavailable || down.Code(t) != "unavailable" {
		t.Fatalf("provider down: %d %s, want 503 unavailable", down.Status, down.Body)
	}
	if n := accounts(); n != before {
		t.Fatalf("%d accounts after refusals, want %d", n, before)
	}
	f.Remove()
	wantStatus(t, post("Loja Tres", "sk_test_family_three"), http.StatusCreated)
}

// Accounts registered before registration asked the provider have no
// provider account: a pass at start asks for each, so a restricted key of
// one of them is refused afterwards like any other; two old accounts of
// one provider account are both left as they are, counted and logged, and
// a second pass asks only about what is still unknown.
func TestProviderAccountsOfOldAccountsAreRecorded(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	ctx := context.Background()
	old := func(secret string) {
		t.Helper()
		a, _, err := e.Accounts.Create(ctx, "Loja "+secret, secret, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.DB.Pool.Exec(ctx, `UPDATE accounts SET stripe_account_id = NULL WHERE id = $1`, a.ID); err != nil {
			t.Fatal(err)
		}
	}
	old("sk_live_family_old")
	old("sk_live_family_twice")
	old("rk_live_family_twice")

	sum, err := e.Accounts.RecordProviderAccounts(ctx, e.Logger())
	if err != nil {
		t.Fatal(err)
	}
	if sum != (account.OwnersSummary{Examined: 3, Recorded: 2, Shared: 1}) {
		t.Fatalf("first pass %+v, want 3 examined, 2 recorded, 1 shared", sum)
	}
	var stored string
	if err := e.DB.Pool.QueryRow(ctx, `SELECT stripe_account_id FROM accounts WHERE name = 'Loja sk_live_family_old'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != providersim.AccountOf("sk_live_family_old") {
		t.Fatalf("recorded %q, want %q", stored, providersim.AccountOf("sk_live_family_old"))
	}
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts", Bearer: apitest.AdminToken,
		Body: `{"name":"Copia","stripe_secret_key":"rk_live_family_old"}`})
	if r.Status != http.StatusConflict || r.Code(t) != "provider_credentials_in_use" {
		t.Fatalf("restricted key of an old account: %d %s, want 409 provider_credentials_in_use", r.Status, r.Body)
	}
	if sum, err = e.Accounts.RecordProviderAccounts(ctx, e.Logger()); err != nil || sum != (account.OwnersSummary{Examined: 1, Shared: 1}) {
		t.Fatalf("second pass %+v %v, want only the shared one examined", sum, err)
	}
	if !strings.Contains(e.Logs.String(), "two accounts hold keys of one provider account") {
		t.Fatalf("the shared provider account was not logged")
	}
}
