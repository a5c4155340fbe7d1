package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// client is a browser without JavaScript: a cookie jar, redirects not
// followed.
type client struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newClient(t *testing.T, e *apitest.Env) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: e.URL, hc: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *client) do(method, path string, form url.Values) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
var keyField = regexp.MustCompile(`name="idempotency_key" value="([^"]+)"`)

func field(t *testing.T, re *regexp.Regexp, page string) string {
	t.Helper()
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no %s in page:\n%s", re, page)
	}
	return m[1]
}

// signIn signs in as actor with token and returns the sign-in answer.
func (c *client) signIn(actor, token string) (*http.Response, string) {
	c.t.Helper()
	_, page := c.do(http.MethodGet, "/console/sign-in", nil)
	return c.do(http.MethodPost, "/console/sign-in", url.Values{"csrf_token": {field(c.t, csrfField, page)},
		"actor": {actor}, "token": {token}, "next": {"/console/"}})
}

func wantRedirect(t *testing.T, res *http.Response, prefix string) {
	t.Helper()
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), prefix) {
		t.Fatalf("%s %s = %d to %q, want 303 to %s…", res.Request.Method, res.Request.URL.Path, res.StatusCode, res.Header.Get("Location"), prefix)
	}
}

// createPayment makes a payment through the API and returns its id.
func createPayment(t *testing.T, e *apitest.Env, order, method string, want int) string {
	t.Helper()
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-" + order,
		Body: fmt.Sprintf(`{"order_id":%q,"amount":2500,"currency":"BRL","payment_method":%q,"capture_method":"manual"}`, order, method)})
	if r.Status != want {
		t.Fatalf("create %s = %d %s, want %d", order, r.Status, r.Body, want)
	}
	var p struct{ ID string }
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatal(err)
	}
	return p.ID
}

// dropAuthorize makes the next authorization take effect at the provider
// while its answer is lost (twice: net/http re-sends once on a reused
// connection).
func dropAuthorize(e *apitest.Env) {
	e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	id := createPayment(t, e, "pedido-auth", "pm_card_visa", http.StatusCreated)

	t.Run("EveryPageAndActionRedirectsToSignInWithoutASession", func(t *testing.T) {
		c := newClient(t, e)
		for _, p := range []struct{ method, path string }{
			{"GET", "/console/"}, {"GET", "/console"}, {"GET", "/console/payments"}, {"GET", "/console/payments/" + id},
			{"GET", "/console/payments/" + id + "/reconcile"}, {"GET", "/console/payments/" + id + "/replay"},
			{"GET", "/console/payments/" + id + "/cancel"}, {"GET", "/console/accounts"},
			{"POST", "/console/payments/" + id + "/reconcile"}, {"POST", "/console/payments/" + id + "/replay"},
			{"POST", "/console/payments/" + id + "/cancel"}, {"POST", "/console/accounts"}, {"POST", "/console/sign-out"},
		} {
			var form url.Values
			if p.method == "POST" {
				form = url.Values{"reason": {"x"}, "name": {"n"}, "stripe_secret_key": {"sk_test_x"}}
			}
			res, _ := c.do(p.method, p.path, form)
			wantRedirect(t, res, "/console/sign-in?next=")
		}
	})

	t.Run("WrongTokenIsRefusedWithoutAHint", func(t *testing.T) {
		c := newClient(t, e)
		for _, token := range []string{"", "wrong", apitest.AdminToken + "x", apitest.AdminToken[:len(apitest.AdminToken)-1]} {
			res, page := c.signIn("Ana", token)
			if res.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "Sign-in failed.") {
				t.Fatalf("token %q: %d, want 401 with Sign-in failed.", token, res.StatusCode)
			}
			for _, ck := range res.Cookies() {
				if ck.Name == "console_session" && ck.MaxAge >= 0 {
					t.Fatalf("token %q set a session cookie", token)
				}
			}
		}
		res, _ := c.do(http.MethodGet, "/console/", nil)
		wantRedirect(t, res, "/console/sign-in")
	})

	t.Run("RightTokenGivesAStrictHTTPOnlyCookie", func(t *testing.T) {
		c := newClient(t, e)
		res, _ := c.signIn("Ana", apitest.AdminToken)
		wantRedirect(t, res, "/console/")
		var got *http.Cookie
		for _, ck := range res.Cookies() {
			if ck.Name == "console_session" {
				got = ck
			}
		}
		if got == nil || !got.HttpOnly || got.SameSite != http.SameSiteStrictMode || got.MaxAge <= 0 || got.Secure {
			t.Fatalf("session cookie = %+v, want HttpOnly, SameSite=Strict, an expiry, not Secure over plain HTTP", got)
		}
		res, page := c.do(http.MethodGet, "/console/", nil)
		if res.StatusCode != http.StatusOK || !strings.Contains(page, `id="actor">Ana<`) {
			t.Fatalf("overview = %d, want 200 signed in as Ana:\n%s", res.StatusCode, page)
		}
		if strings.Contains(e.Logs.String(), apitest.AdminToken) {
			t.Fatal("the admin token reached the log")
		}
	})

	t.Run("AFormWithoutItsCSRFTokenIsRefused", func(t *testing.T) {
		c := newClient(t, e)
		c.signIn("Ana", apitest.AdminToken)
		_, page := c.do(http.MethodGet, "/console/payments/"+id+"/reconcile", nil)
		token := field(t, csrfField, page)
		for _, bad := range []url.Values{
			{"reason": {"check"}},
			{"reason": {"check"}, "csrf_token": {""}},
			{"reason": {"check"}, "csrf_token": {token[:len(token)-2] + "xx"}},
		} {
			res, _ := c.do(http.MethodPost, "/console/payments/"+id+"/reconcile", bad)
			if res.StatusCode != http.StatusForbidden {
				t.Fatalf("POST with csrf_token %q = %d, want 403", bad.Get("csrf_token"), res.StatusCode)
			}
		}
		// Another session's token is refused too.
		other := newClient(t, e)
		other.signIn("Bia", apitest.AdminToken)
		res, _ := other.do(http.MethodPost, "/console/payments/"+id+"/reconcile", url.Values{"reason": {"check"}, "csrf_token": {token}})
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("another session's token = %d, want 403", res.StatusCode)
		}
		res, _ = c.do(http.MethodPost, "/console/payments/"+id+"/reconcile", url.Values{"reason": {"check"}, "csrf_token": {token}})
		wantRedirect(t, res, "/console/payments/"+id)
		if !strings.Contains(e.Logs.String(), `"actor":"Ana"`) {
			t.Fatal("no log line names the actor")
		}
	})

	t.Run("AnActionNeedsAReason", func(t *testing.T) {
		c := newClient(t, e)
		c.signIn("Ana", apitest.AdminToken)
		_, page := c.do(http.MethodGet, "/console/payments/"+id+"/cancel", nil)
		res, _ := c.do(http.MethodPost, "/console/payments/"+id+"/cancel", url.Values{"reason": {"  "},
			"csrf_token": {field(t, csrfField, page)}, "idempotency_key": {field(t, keyField, page)}})
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("cancel without a reason = %d, want 400", res.StatusCode)
		}
		if st := e.Sim.Stats(); st.Cancels != 0 {
			t.Fatalf("the simulator saw %d cancels, want 0", st.Cancels)
		}
	})

	t.Run("ADoubleSubmittedCancelCancelsOnce", func(t *testing.T) {
		c := newClient(t, e)
		c.signIn("Ana", apitest.AdminToken)
		_, page := c.do(http.MethodGet, "/console/payments/"+id+"/cancel", nil)
		form := url.Values{"reason": {"customer asked"}, "csrf_token": {field(t, csrfField, page)}, "idempotency_key": {field(t, keyField, page)}}
		for range 2 {
			res, _ := c.do(http.MethodPost, "/console/payments/"+id+"/cancel", form)
			wantRedirect(t, res, "/console/payments/"+id)
		}
		v, err := e.Operations.AdminGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		cancels := 0
		for _, a := range v.Attempts {
			if a.Operation == payment.OpCancel {
				cancels++
			}
		}
		if v.Payment.Status != "canceled" || cancels != 1 {
			t.Fatalf("payment %s with %d cancel attempts, want canceled with 1", v.Payment.Status, cancels)
		}
		found := false
		for _, a := range v.Audit {
			if a.Action == string(payment.OpCancel)+".requested" && a.Actor == "Ana" && a.Reason == "customer asked" {
				found = true
			}
		}
		if !found {
			t.Fatalf("audit %+v has no cancel.requested by Ana with the reason", v.Audit)
		}
	})
}

func TestTimelineShowsRequestIDs(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-timeline",
		Headers: map[string]string{"X-Request-Id": "merchant-req-timeline"},
		Body:    `{"order_id":"pedido-timeline","amount":2500,"currency":"BRL","payment_method":"pm_card_visa","capture_method":"manual"}`})
	if r.Status != http.StatusCreated {
		t.Fatalf("create = %d %s", r.Status, r.Body)
	}
	var p struct{ ID string }
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, e)
	c.signIn("Ana", apitest.AdminToken)
	_, page := c.do(http.MethodGet, "/console/payments/"+p.ID, nil)
	row := regexp.MustCompile(`(?s)<tr data-kind="audit">.*?payment\.created.*?</tr>`).FindString(page)
	if !strings.Contains(row, `<td class="mono request-id">merchant-req-timeline</td>`) {
		t.Fatalf("timeline row of the create %q lacks its request id:\n%s", row, page)
	}
}
