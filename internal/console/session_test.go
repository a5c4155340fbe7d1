package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
)

// signInForm loads the sign-in page and returns its CSRF token.
func (c *client) signInForm() string {
	c.t.Helper()
	_, page := c.do(http.MethodGet, "/console/sign-in", nil)
	return field(c.t, csrfField, page)
}

func (c *client) postSignIn(csrf, token string) *http.Response {
	c.t.Helper()
	res, _ := c.do(http.MethodPost, "/console/sign-in", url.Values{"csrf_token": {csrf},
		"actor": {"Ana"}, "token": {token}, "next": {"/console/"}})
	return res
}

func countSessions(t *testing.T, e *apitest.Env) int {
	t.Helper()
	var n int
	if err := e.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM console_sessions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func signedIn(t *testing.T, c *client) bool {
	t.Helper()
	res, _ := c.do(http.MethodGet, "/console/", nil)
	return res.StatusCode == http.StatusOK
}

func TestSignInLimitedPerAddress(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	c := newClient(t, e)
	statuses := map[int]int{}
	for range 500 {
		res, _ := c.signIn("Ana", "a-wrong-guess-of-the-admin-token")
		statuses[res.StatusCode]++
		if res.StatusCode == http.StatusTooManyRequests && res.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	}
	t.Logf("500 wrong sign-ins: %d × 401, %d × 429", statuses[http.StatusUnauthorized], statuses[http.StatusTooManyRequests])
	if statuses[http.StatusUnauthorized] != 10 || statuses[http.StatusTooManyRequests] != 490 {
		t.Fatalf("500 wrong sign-ins: %v, want 10 × 401 and 490 × 429", statuses)
	}
	// The right token is refused too, and opens no session.
	if res, _ := c.signIn("Ana", apitest.AdminToken); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right token while limited = %d, want 429", res.StatusCode)
	}
	if n := countSessions(t, e); n != 0 || signedIn(t, c) {
		t.Fatalf("%d sessions after sign-ins while limited, want 0", n)
	}
	// The admin API shares the count.
	if r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments", Bearer: apitest.AdminToken}); r.Status != http.StatusTooManyRequests {
		t.Fatalf("admin API while limited = %d, want 429", r.Status)
	}
	e.Clock.Advance(time.Minute)
	res, _ := c.signIn("Ana", apitest.AdminToken)
	wantRedirect(t, res, "/console/")
	if n := countSessions(t, e); n != 1 || !signedIn(t, c) {
		t.Fatalf("%d sessions a minute later, want 1 and signed in", n)
	}
}

// postPair posts a sign-in with a fixed sign-in cookie and CSRF token, as
// a script that ignores the cookies it is sent would.
func postPair(t *testing.T, e *apitest.Env, nonce, csrf, token string) *http.Response {
	t.Helper()
	form := url.Values{"csrf_token": {csrf}, "actor": {"Ana"}, "token": {token}, "next": {"/console/"}}
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/console/sign-in", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "console_sign_in", Value: nonce})
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

func (c *client) cookie(name string) string {
	u, _ := url.Parse(c.base + "/console/")
	for _, ck := range c.hc.Jar.Cookies(u) {
		if ck.Name == name {
			return ck.Value
		}
	}
	c.t.Fatalf("no %s cookie", name)
	return ""
}

func TestSignInFormIsGoodOnce(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	c := newClient(t, e)
	csrf := c.signInForm()
	nonce := c.cookie("console_sign_in")
	statuses := map[int]int{}
	for range 5 {
		statuses[postPair(t, e, nonce, csrf, "wrong").StatusCode]++
	}
	if statuses[http.StatusUnauthorized] != 1 || statuses[http.StatusForbidden] != 4 {
		t.Fatalf("one form posted 5 times: %v, want 1 × 401 then 4 × 403", statuses)
	}
	// The same form again, even with the right token: refused.
	if res := postPair(t, e, nonce, csrf, apitest.AdminToken); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a used form with the right token = %d, want 403", res.StatusCode)
	}
	if n := countSessions(t, e); n != 0 {
		t.Fatalf("%d sessions after a used form, want 0", n)
	}
	// A successful sign-in uses its form up too.
	csrf = c.signInForm()
	nonce = c.cookie("console_sign_in")
	wantRedirect(t, c.postSignIn(csrf, apitest.AdminToken), "/console/")
	if res := postPair(t, e, nonce, csrf, apitest.AdminToken); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a form used to sign in, again = %d, want 403", res.StatusCode)
	}
	if n := countSessions(t, e); n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}
}

func TestSignInFormExpiresAfterTenMinutes(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	c := newClient(t, e)
	old := c.signInForm()
	e.Clock.Advance(10 * time.Minute)
	if res := c.postSignIn(old, apitest.AdminToken); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a form 10 minutes old = %d, want 403", res.StatusCode)
	}
	if n := countSessions(t, e); n != 0 || signedIn(t, c) {
		t.Fatalf("%d sessions after an expired form, want 0", n)
	}
	young := c.signInForm()
	e.Clock.Advance(9*time.Minute + 55*time.Second)
	wantRedirect(t, c.postSignIn(young, apitest.AdminToken), "/console/")
}

func TestSignOutEndsTheSession(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	c := newClient(t, e)
	res, _ := c.signIn("Ana", apitest.AdminToken)
	wantRedirect(t, res, "/console/")
	sessionID := c.cookie("console_session")
	_, page := c.do(http.MethodGet, "/console/", nil)
	res, _ = c.do(http.MethodPost, "/console/sign-out", url.Values{"csrf_token": {field(t, csrfField, page)}})
	wantRedirect(t, res, "/console/sign-in")
	if n := countSessions(t, e); n != 0 {
		t.Fatalf("%d sessions after sign-out, want 0", n)
	}
	// The old cookie, kept by someone, opens nothing.
	for _, path := range []string{"/console/", "/console/payments", "/console/accounts"} {
		req, _ := http.NewRequest(http.MethodGet, e.URL+path, nil)
		req.AddCookie(&http.Cookie{Name: "console_session", Value: sessionID})
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/console/sign-in") {
			t.Fatalf("%s with the signed-out cookie = %d to %q, want a redirect to sign-in", path, res.StatusCode, res.Header.Get("Location"))
		}
	}
}

func TestSessionExpiresOnTheServer(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	c := newClient(t, e)
	res, _ := c.signIn("Ana", apitest.AdminToken)
	wantRedirect(t, res, "/console/")
	// The server holds the session and its end.
	var expires, now time.Time
	if err := e.DB.Pool.QueryRow(context.Background(), `SELECT expires_at, created_at FROM console_sessions WHERE actor = 'Ana'`).Scan(&expires, &now); err != nil {
		t.Fatalf("no session row: %v", err)
	}
	if d := expires.Sub(now); d != 8*time.Hour {
		t.Fatalf("session lasts %v, want 8h", d)
	}
	e.Clock.Advance(8*time.Hour - time.Minute)
	if !signedIn(t, c) {
		t.Fatal("signed out before 8 h")
	}
	e.Clock.Advance(2 * time.Minute)
	if signedIn(t, c) {
		t.Fatal("still signed in after 8 h")
	}
	// The next sign-in forgets the expired session.
	other := newClient(t, e)
	res, _ = other.signIn("Bia", apitest.AdminToken)
	wantRedirect(t, res, "/console/")
	if n := countSessions(t, e); n != 1 {
		t.Fatalf("%d sessions, want only Bia's", n)
	}
}
