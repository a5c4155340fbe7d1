package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
)

func countAccounts(t *testing.T, e *apitest.Env) int {
	t.Helper()
	var n int
	if err := e.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM accounts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Ten failed admin authentications from one address within a minute shut
// that address out of the admin API (and of the console's sign-in),
// whatever token it carries, until fewer than ten are within the minute.
func TestAdminAuthFailuresLimitedPerAddress(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	statuses := map[int]int{}
	for i := range 300 {
		bearer := fmt.Sprintf("guess-%03d", i)
		if i%3 == 0 {
			bearer = "-" // no Authorization at all
		}
		// A made-up X-Forwarded-For does not make another client: no proxy
		// is trusted by default.
		r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments", Bearer: bearer,
			Headers: map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i%250)}})
		statuses[r.Status]++
		if r.Status == http.StatusTooManyRequests {
			if r.Code(t) != "rate_limited" {
				t.Fatalf("429 with code %q, want rate_limited", r.Code(t))
			}
			if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
				t.Fatalf("429 with Retry-After %q, want 1..60 seconds", r.Header.Get("Retry-After"))
			}
		}
	}
	t.Logf("300 wrong bearers: %d × 401, %d × 429", statuses[http.StatusUnauthorized], statuses[http.StatusTooManyRequests])
	if statuses[http.StatusUnauthorized] != 10 || statuses[http.StatusTooManyRequests] != 290 {
		t.Fatalf("300 wrong bearers: %v, want 10 × 401 and 290 × 429", statuses)
	}

	// The right token is refused too, and does nothing.
	before := countAccounts(t, e)
	create := apitest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts", Bearer: apitest.AdminToken,
		Body: `{"name":"Loja Limitada","stripe_secret_key":"sk_test_limited_` + apitest.SecretSuffix(t) + `"}`}
	if r := e.Do(create); r.Status != http.StatusTooManyRequests {
		t.Fatalf("the right token while limited = %d %s, want 429", r.Status, r.Body)
	}
	if n := countAccounts(t, e); n != before {
		t.Fatalf("%d accounts after a refused create, want %d", n, before)
	}
	// The console's sign-in shares the count.
	res, err := http.PostForm(e.URL+"/console/sign-in", url.Values{"actor": {"Ana"}, "token": {apitest.AdminToken}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("console sign-in while limited = %d (Retry-After %q), want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}

	// A minute after the failures, the address is let in again.
	e.Clock.Advance(time.Minute)
	if r := e.Do(create); r.Status != http.StatusCreated {
		t.Fatalf("the right token a minute later = %d %s, want 201", r.Status, r.Body)
	}
	if n := countAccounts(t, e); n != before+1 {
		t.Fatalf("%d accounts after the create, want %d", n, before+1)
	}
	// Successes do not count; nine failures do not shut it out.
	for range 9 {
		e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments", Bearer: "wrong"})
	}
	if r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments", Bearer: apitest.AdminToken}); r.Status != http.StatusOK {
		t.Fatalf("after 9 failures = %d, want 200", r.Status)
	}
}

// An unknown account, an account without a webhook secret and a wrong
// signature get the same answer: the webhook endpoint does not tell which
// accounts exist.
func TestWebhookRefusalDoesNotTellAccountsApart(t *testing.T) {
	t.Parallel()
	w := newWebhookEnv(t)
	payload := []byte(`{"id":"evt_probe","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_x","object":"payment_intent"}}}`)
	sig := signWebhook(payload, "whsec_guess", time.Now())
	answers := map[string]string{}
	for name, acct := range map[string]string{
		"unknown account":        "acct_does_not_exist",
		"account without secret": w.Account.ID,
		"wrong signature":        w.acctID,
	} {
		r := w.post(acct, payload, sig)
		body := r.JSON(t)
		answers[name] = fmt.Sprintf("%d %v %v", r.Status, body["code"], body["detail"])
	}
	first := ""
	for name, a := range answers {
		if !strings.HasPrefix(a, "400 invalid_request ") {
			t.Fatalf("%s: %s, want 400 invalid_request", name, a)
		}
		if first == "" {
			first = a
		} else if a != first {
			t.Fatalf("answers differ: %v", answers)
		}
	}
	var n int
	if err := w.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_deliveries`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d webhook deliveries stored, want 0", n)
	}
}
