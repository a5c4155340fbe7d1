package api_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/go-chi/chi/v5"
)

// hostileValues are query values and cursors no list issued: invalid
// UTF-8 behind base64, NUL, huge and negative numbers and times, other
// lists' and versions' tokens, wrong types.
var hostileValues = []string{
	"zz", "_w", "%FF", "%00", "%C0%80", "-1", "0", "-9223372036854775808", "9223372036854775807",
	"99999999999999999999999999", "1e309", "NaN", "-1h", "9999999h", "", "%20", "null", "[]", "{}",
	strings.Repeat("a", 5000),
	b64("1.stuck.-9223372036854775808.pay_0123456789abcdef0123456789abcdef"),
	b64("1.stuck.-62135596800000001.pay_0123456789abcdef0123456789abcdef"),
	b64("1.stuck.253402300800000000.pay_0123456789abcdef0123456789abcdef"),
	b64("1.discrepancy.\xff\xfe"), b64("1.discrepancy.dsc_\x00"), b64("2.stuck.0.pay_0123456789abcdef0123456789abcdef"),
	b64("\xff\xfe\xfd"), b64("-9223372036854775808.pay_0123456789abcdef0123456789abcdef"), "18446744073709551615.1", "1.-1", "1.99999999999999999999",
}

// hostileParams are every query parameter some list or page reads.
var hostileParams = []string{"cursor", "after", "starting_after", "limit", "status", "payment_id", "order_id",
	"account_id", "older_than", "statuses", "kind", "next", "done"}

// hostileBodies are request bodies of every wrong shape.
var hostileBodies = []string{
	"", "\xff\xfe", `{"a":"\u0000"}`, "{\"order_id\":\"\xff\"}", strings.Repeat("[", 100000), strings.Repeat(`{"a":`, 20000),
	`{"amount":1e999999}`, `{"amount":-99999999999999999999999}`, `{"amount":"2000"}`, `{"amount":2000.5}`,
	`{"order_id":123,"amount":true,"currency":[],"payment_method":{}}`, `[]`, `null`, `"x"`, `1`,
	`{"actor":"a","reason":"r","action":"refund"}`, `{"url":"https://[::1%25lo]/","enabled_events":["*"]}`,
	`{"order_id":"o","amount":2000,"currency":"BRL","payment_method":"pm_card_visa","expires_in":-9223372036854775808}`,
	`{"order_id":"o","amount":2000,"currency":"BRL","payment_method":"pix","expires_in":99999999999999999999}`,
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestHostileInputNeverAnswers5xx walks every route of the router and
// sends each hostile query, cursor, path id and body with valid
// credentials (the API key, the admin token, a console session): no answer
// is a 5xx.
func TestHostileInputNeverAnswers5xx(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	payID := e.Create("k-hostile", createBody("pedido-hostile", 2000)).JSON(t)["id"].(string)
	hc := consoleClient(t, e)
	var failures []string
	send := func(method, target, body string) {
		t.Helper()
		req, err := http.NewRequest(method, e.URL+target, strings.NewReader(body))
		if err != nil {
			return // not a request a client can send
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("k-hostile-%d", len(failures)))
		switch {
		case strings.HasPrefix(target, "/admin/"):
			req.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
		case strings.HasPrefix(target, "/v1/"):
			req.Header.Set("Authorization", "Bearer "+e.APIKey)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode >= 500 {
			failures = append(failures, fmt.Sprintf("%s %.120q (body %.40q) = %d", method, target, body, res.StatusCode))
		}
	}
	walked := 0
	ids := []string{payID, e.Account.ID, "pay_zz", "%FF", "%00", strings.Repeat("x", 3000), "dsc_0123456789abcdef0123456789abcdef", "-1"}
	err := chi.Walk(e.Router.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.HasSuffix(route, "/*") || route == "/console/sign-out" {
			return nil
		}
		routeIDs := ids
		if !strings.Contains(route, "{") {
			routeIDs = ids[:1]
		}
		for i, id := range routeIDs {
			path := pathWith(route, id)
			switch {
			case method != http.MethodGet:
				for _, b := range hostileBodies {
					send(method, path, b)
				}
			case i > 0:
				send(method, path, "")
			default:
				for _, p := range hostileParams {
					for _, v := range hostileValues {
						send(method, path+"?"+p+"="+queryValue(v), "")
					}
				}
			}
		}
		walked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if walked < 40 {
		t.Fatalf("walked %d routes, want every route of the API and the console", walked)
	}
	if len(failures) > 0 {
		t.Fatalf("%d hostile requests answered 5xx, first:\n%s", len(failures), strings.Join(failures[:min(len(failures), 20)], "\n"))
	}
}

var routeParam = regexp.MustCompile(`\{[^}]+\}`)

func pathWith(route, id string) string {
	route = strings.TrimSuffix(route, "/")
	if route == "" {
		route = "/"
	}
	return routeParam.ReplaceAllString(route, id)
}

// queryValue keeps %-escapes as written and escapes the rest.
func queryValue(v string) string {
	if strings.Contains(v, "%") {
		return v
	}
	return url.QueryEscape(v)
}

// consoleClient is a client with a console session.
func consoleClient(t *testing.T, e *apitest.Env) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.Get(e.URL + "/console/sign-in")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no sign-in form:\n%s", page)
	}
	res, err = hc.PostForm(e.URL+"/console/sign-in", url.Values{"csrf_token": {string(m[1])}, "actor": {"Ana"},
		"token": {apitest.AdminToken}, "next": {"/console/"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("console sign-in = %d", res.StatusCode)
	}
	return hc
}
