package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// snapshot is what a rejected request must leave unchanged: the rows of
// every table and the calls the provider saw.
type snapshot struct {
	rows     map[string]int
	provider int
}

func takeSnapshot(t *testing.T, e *apitest.Env) snapshot {
	t.Helper()
	ctx := context.Background()
	rows, err := e.DB.Pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	s := snapshot{rows: map[string]int{}, provider: len(e.Sim.Requests())}
	for _, tbl := range tables {
		var n int
		if err := e.DB.Pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q`, tbl)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		s.rows[tbl] = n
	}
	return s
}

func wantUnchanged(t *testing.T, e *apitest.Env, before snapshot) {
	t.Helper()
	after := takeSnapshot(t, e)
	for tbl, n := range before.rows {
		if after.rows[tbl] != n {
			t.Errorf("table %s: %d rows, want %d: a rejected request wrote to the database", tbl, after.rows[tbl], n)
		}
	}
	if after.provider != before.provider {
		t.Errorf("the provider saw %d calls, want %d: a rejected request reached it", after.provider, before.provider)
	}
}

// wantRejected checks a 400 invalid_request (naming field when it is not
// empty) or a 404 not_found when field is "404".
func wantRejected(t *testing.T, name string, r *apitest.Response, field string) {
	t.Helper()
	if field == "404" {
		if r.Status != http.StatusNotFound || r.Code(t) != "not_found" {
			t.Errorf("%s: got %d %s, want 404 not_found", name, r.Status, r.Body)
		}
		return
	}
	if r.Status != http.StatusBadRequest || r.Code(t) != "invalid_request" {
		t.Errorf("%s: got %d %s, want 400 invalid_request", name, r.Status, r.Body)
		return
	}
	if field == "" {
		return
	}
	errs, _ := r.JSON(t)["errors"].([]any)
	for _, fe := range errs {
		if fe.(map[string]any)["field"] == field {
			return
		}
	}
	t.Errorf("%s: field %q not named: %s", name, field, r.Body)
}

// hostileSetup makes a manual payment (authorized) and one whose outcome is
// unknown, the one the reconciler would ask the provider about.
func hostileSetup(t *testing.T) (e *apitest.Env, authorized, unknown string) {
	e = apitest.New(t, apitest.Options{})
	r := create(e, "k-auth", createBody("pedido-auth", 2000))
	wantStatus(t, r, http.StatusCreated)
	authorized = r.JSON(t)["id"].(string)
	e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
	unknown = createUnknown(t, e, "k-unk", createBody("pedido-unk", 2000))["id"].(string)
	return e, authorized, unknown
}

// TestHostileStrings sends NUL bytes and invalid UTF-8 to every entry point
// that takes a string: each is refused before anything is reserved, stored
// or sent, as a 400 naming the field (404 for a path id), never a 500.
func TestHostileStrings(t *testing.T) {
	t.Parallel()
	e, auth, unk := hostileSetup(t)
	before := takeSnapshot(t, e)

	// Each bad string as it appears inside a JSON string and in a URL.
	bad := []struct{ name, json, url string }{
		{"NUL", `a\u0000b`, "a%00b"},
		{"raw invalid UTF-8", "a\xffb", "a%FFb"},
		{"lone surrogate", `a\ud800b`, "a%ED%A0%80b"},
	}
	admin := apitest.AdminToken
	for _, b := range bad {
		s := `"` + b.json + `"`
		bodies := []struct {
			path, bearer, key, body, field string
		}{
			{"/v1/payments", "", "k1", `{"order_id":` + s + `,"amount":1,"currency":"BRL","payment_method":"pm_card_visa"}`, "order_id"},
			{"/v1/payments", "", "k1", `{"order_id":"o","amount":1,"currency":` + s + `,"payment_method":"pm_card_visa"}`, "currency"},
			{"/v1/payments", "", "k1", `{"order_id":"o","amount":1,"currency":"BRL","payment_method":` + s + `}`, "payment_method"},
			{"/v1/payments", "", "k1", `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa","capture_method":` + s + `}`, "capture_method"},
			{"/v1/payments", "", "k1", `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa","customer_id":` + s + `}`, "customer_id"},
			{"/v1/payments", "", "k1", `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa","description":` + s + `}`, "description"},
			{"/v1/payments", "", "k1", `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa","metadata":{"k":` + s + `}}`, "metadata.k"},
			{"/v1/payments", "", "k1", `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa","metadata":{` + s + `:"v"}}`, ""},
			{"/v1/payments", "", "k1", `{` + s + `:1,"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa"}`, ""},
			{"/v1/payments/" + auth + "/capture", "", "k1", `{` + s + `:1}`, ""},
			{"/v1/payments/" + auth + "/refunds", "", "k1", `{"amount":1,` + s + `:1}`, ""},
			{"/v1/payments/" + auth + "/cancel", "", "k1", `{` + s + `:1}`, ""},
			{"/admin/v1/payments/" + unk + "/reconcile", admin, "", `{"actor":` + s + `,"reason":"r"}`, "actor"},
			{"/admin/v1/payments/" + unk + "/reconcile", admin, "", `{"actor":"ops","reason":` + s + `}`, "reason"},
			{"/admin/v1/payments/" + unk + "/replay", admin, "k1", `{"actor":` + s + `,"reason":"r"}`, "actor"},
			{"/admin/v1/payments/" + unk + "/replay", admin, "k1", `{"actor":"ops","reason":` + s + `}`, "reason"},
			{"/admin/v1/accounts", admin, "", `{"name":` + s + `,"stripe_secret_key":"sk_test_hostile"}`, "name"},
			{"/admin/v1/accounts", admin, "", `{"name":"n","stripe_secret_key":` + s + `}`, "stripe_secret_key"},
			{"/admin/v1/accounts", admin, "", `{"name":"n","stripe_secret_key":"sk_test_hostile","webhook_secret":` + s + `}`, "webhook_secret"},
		}
		for _, c := range bodies {
			name := b.name + " in " + c.path + " " + c.body
			r := e.Do(apitest.Request{Method: http.MethodPost, Path: c.path, Bearer: c.bearer, Key: c.key, Body: c.body})
			wantRejected(t, name, r, c.field)
		}

		u := b.url
		urls := []struct {
			method, path, bearer, key, body, field string
		}{
			{http.MethodGet, "/v1/payments/" + u, "", "", "", "404"},
			{http.MethodGet, "/v1/payments/" + auth + u, "", "", "", "404"},
			{http.MethodPost, "/v1/payments/" + u + "/capture", "", "k1", "", "404"},
			{http.MethodPost, "/v1/payments/" + u + "/cancel", "", "k1", "", "404"},
			{http.MethodPost, "/v1/payments/" + u + "/refunds", "", "k1", `{"amount":1}`, "404"},
			{http.MethodGet, "/admin/v1/payments/" + u, admin, "", "", "404"},
			{http.MethodPost, "/admin/v1/payments/" + unk + u + "/reconcile", admin, "", replayBody, "404"},
			{http.MethodPost, "/admin/v1/payments/" + unk + u + "/replay", admin, "k1", replayBody, "404"},
			{http.MethodPost, "/webhooks/stripe/" + u, "-", "", `{}`, "404"},
			{http.MethodGet, "/v1/payments?order_id=" + u, "", "", "", "order_id"},
			{http.MethodGet, "/v1/payments?order_id=o&limit=" + u, "", "", "", "limit"},
			{http.MethodGet, "/v1/events?after=" + u, "", "", "", "after"},
			{http.MethodGet, "/admin/v1/payments?status=" + u, admin, "", "", "status"},
			{http.MethodGet, "/admin/v1/payments?older_than=" + u, admin, "", "", "older_than"},
		}
		for _, c := range urls {
			name := b.name + " in " + c.method + " " + c.path
			r := e.Do(apitest.Request{Method: c.method, Path: c.path, Bearer: c.bearer, Key: c.key, Body: c.body})
			wantRejected(t, name, r, c.field)
		}
	}
	wantUnchanged(t, e, before)
}

// TestHostileHeaderValues: net/http lets invalid UTF-8 through in header
// values; it is refused like any other text, before anything is reserved.
func TestHostileHeaderValues(t *testing.T) {
	t.Parallel()
	e, _, _ := hostileSetup(t)
	before := takeSnapshot(t, e)
	sent := len(e.Sim.Requests())
	body := `{"order_id":"pedido-hdr","amount":100,"currency":"BRL","payment_method":"pm_card_visa"}`
	for _, h := range []string{"X-Request-Id", "Idempotency-Key", "X-Anything", "User-Agent"} {
		key := "k-hdr"
		headers := map[string]string{h: "a\xffb"}
		if h == "Idempotency-Key" {
			key, headers = "", map[string]string{h: "k\xff"}
		}
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: body, Headers: headers})
		if r.Status != http.StatusBadRequest || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") {
			t.Fatalf("invalid UTF-8 in %s: %d %s, want a 400 problem", h, r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), "\xff") {
			t.Fatalf("invalid UTF-8 in %s echoed: %q", h, r.Body)
		}
	}
	wantUnchanged(t, e, before)
	if n := len(e.Sim.Requests()); n != sent {
		t.Fatalf("provider requests %d -> %d, want none sent", sent, n)
	}
}

// TestStrictJSON: a body means one thing or is refused. Duplicate names,
// names in another case, unknown names, trailing data and nulls are 400 on
// every endpoint that takes a body, before anything is reserved or sent.
func TestStrictJSON(t *testing.T) {
	t.Parallel()
	e, auth, unk := hostileSetup(t)
	before := takeSnapshot(t, e)
	admin := apitest.AdminToken
	good := `{"order_id":"o","amount":100,"currency":"BRL","payment_method":"pm_card_visa"}`
	endpoints := []struct {
		path, bearer, key, body string
	}{
		{"/v1/payments", "", "k1", good},
		{"/v1/payments/" + auth + "/capture", "", "k1", `{"amount":100}`},
		{"/v1/payments/" + auth + "/refunds", "", "k1", `{"amount":100}`},
		{"/v1/payments/" + auth + "/cancel", "", "k1", `{}`},
		{"/admin/v1/payments/" + unk + "/reconcile", admin, "", replayBody},
		{"/admin/v1/payments/" + unk + "/replay", admin, "k1", replayBody},
		{"/admin/v1/accounts", admin, "", `{"name":"n","stripe_secret_key":"sk_test_strict"}`},
	}
	hostile := []struct {
		name string
		edit func(body string) string
	}{
		{"duplicate name", func(b string) string { return strings.Replace(b, "{", `{"dup":1,"dup":2,`, 1) }},
		{"trailing object", func(b string) string { return b + `{}` }},
		{"trailing garbage", func(b string) string { return b + ` x` }},
		{"trailing comma", func(b string) string { return b + `,` }},
		{"unknown name", func(b string) string { return strings.Replace(b, "{", `{"extra":1,`, 1) }},
		{"upper-case name", func(b string) string { return strings.Replace(b, "{", `{"AMOUNT":1,`, 1) }},
		{"null member", func(b string) string { return strings.Replace(b, "{", `{"amount":null,`, 1) }},
		{"array", func(b string) string { return "[" + b + "]" }},
		{"not an object", func(string) string { return `"x"` }},
	}
	for _, ep := range endpoints {
		for _, h := range hostile {
			body := h.edit(ep.body)
			r := e.Do(apitest.Request{Method: http.MethodPost, Path: ep.path, Bearer: ep.bearer, Key: ep.key, Body: body})
			wantRejected(t, h.name+" on "+ep.path+": "+body, r, "")
		}
	}
	// The cases the old decoders got wrong, with the field named.
	named := []struct {
		path, key, body, field string
	}{
		{"/v1/payments", "k1", `{"order_id":"o","amount":100,"amount":999,"currency":"BRL","payment_method":"pm_card_visa"}`, "amount"},
		{"/v1/payments", "k1", `{"order_id":"o","Amount":100,"currency":"BRL","payment_method":"pm_card_visa"}`, "Amount"},
		{"/v1/payments", "k1", `{"order_id":"o","amount":100,"currency":"BRL","payment_method":"pm_card_visa","capture_method":null}`, "capture_method"},
		{"/v1/payments", "k1", `{"order_id":"o","amount":100,"currency":"BRL","payment_method":"pm_card_visa","metadata":null}`, "metadata"},
		{"/v1/payments", "k1", `{"order_id":"o","amount":100,"currency":"BRL","payment_method":"pm_card_visa","customer_id":null}`, "customer_id"},
		{"/v1/payments", "k1", `{"order_id":"o","amount":100,"currency":"BRL","payment_method":"pm_card_visa","metadata":{"a":"1","a":"2"}}`, "metadata.a"},
		{"/v1/payments/" + auth + "/capture", "k1", `{"amount":null}`, "amount"},
		{"/v1/payments/" + auth + "/refunds", "k1", `{"amount":1,"amount":2}`, "amount"},
	}
	for _, c := range named {
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: c.path, Key: c.key, Body: c.body})
		wantRejected(t, c.body, r, c.field)
	}
	// One number grammar: what is refused on create is refused on capture
	// and refunds too.
	for _, n := range []string{`1999.99999999999999999`, `1e-2`, `100.5`, `-100`, `01`, `+1`, `0x10`, `1e100000`, `NaN`, `"100"`, `true`} {
		for _, path := range []string{"/v1/payments", "/v1/payments/" + auth + "/capture", "/v1/payments/" + auth + "/refunds"} {
			body := `{"amount":` + n + `}`
			if path == "/v1/payments" {
				body = `{"order_id":"o","amount":` + n + `,"currency":"BRL","payment_method":"pm_card_visa"}`
			}
			r := e.Do(apitest.Request{Method: http.MethodPost, Path: path, Key: "k1", Body: body})
			wantRejected(t, path+" "+body, r, "")
		}
	}
	wantUnchanged(t, e, before)

	// The same grammar accepts 1e2 as 100 everywhere.
	wantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + auth + "/capture", Key: "k-cap", Body: `{"amount":1e2}`}), http.StatusOK)
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + auth + "/refunds", Key: "k-ref", Body: `{"amount":0.5e2}`})
	wantStatus(t, r, http.StatusCreated)
	if r.JSON(t)["amount"] != float64(50) {
		t.Fatalf("refund of 0.5e2: %s, want amount 50", r.Body)
	}
}

// TestCardNumbersRefused: a card number in any free string the service
// stores or sends is refused, and appears in no answer, row or log line.
func TestCardNumbersRefused(t *testing.T) {
	t.Parallel()
	e, _, unk := hostileSetup(t)
	before := takeSnapshot(t, e)
	const card = "4242424242424242"
	admin := apitest.AdminToken
	base := func(field, value string) string {
		return `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_card_visa",` + field + `:` + value + `}`
	}
	cases := []struct {
		path, bearer, key, body, field string
	}{
		{"/v1/payments", "", "k1", `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"pm_` + card + `"}`, "payment_method"},
		{"/v1/payments", "", "k1", `{"order_id":"o-` + card + `","amount":1,"currency":"BRL","payment_method":"pm_card_visa"}`, "order_id"},
		{"/v1/payments", "", "k1", base(`"customer_id"`, `"cus_`+card+`"`), "customer_id"},
		{"/v1/payments", "", "k1", base(`"description"`, `"card `+card+` thanks"`), "description"},
		{"/v1/payments", "", "k1", base(`"description"`, `"card 4242 4242 4242 4242"`), "description"},
		{"/v1/payments", "", "k1", base(`"description"`, `"card 4242-4242-4242-4242 exp 12/30"`), "description"},
		{"/v1/payments", "", "k1", base(`"metadata"`, `{"pan":"`+card+`"}`), "metadata.pan"},
		{"/v1/payments", "", "k1", base(`"metadata"`, `{"`+card+`":"v"}`), "metadata.################"},
		{"/v1/payments", "", "k1", base(`"`+card+`"`, `"v"`), "################"},
		{"/admin/v1/payments/" + unk + "/reconcile", admin, "", `{"actor":"ops","reason":"customer card ` + card + `"}`, "reason"},
		{"/admin/v1/payments/" + unk + "/replay", admin, "k1", `{"actor":"` + card + `","reason":"r"}`, "actor"},
		{"/admin/v1/accounts", admin, "", `{"name":"Loja ` + card + `","stripe_secret_key":"sk_test_card"}`, "name"},
	}
	for _, c := range cases {
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: c.path, Bearer: c.bearer, Key: c.key, Body: c.body})
		wantRejected(t, c.body, r, c.field)
		// Six digits of the card: a request id in hex is unlikely to hold them.
		if strings.Contains(string(r.Body), "424242") {
			t.Errorf("%s: the answer echoes the card's digits: %s", c.body, r.Body)
		}
	}
	wantUnchanged(t, e, before)
	if strings.Contains(e.Logs.String(), "424242") {
		t.Errorf("the logs carry the card's digits")
	}
	for tbl := range before.rows {
		var rows int
		if err := e.DB.Pool.QueryRow(context.Background(),
			fmt.Sprintf(`SELECT count(*) FROM %q x WHERE x::text LIKE '%%4242424242424242%%'`, tbl)).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 0 {
			t.Errorf("%d rows of %s hold the card's digits", rows, tbl)
		}
	}
	for _, req := range e.Sim.Requests() {
		if strings.Contains(fmt.Sprint(req), card) {
			t.Errorf("the provider was sent the card number")
		}
	}
}

// TestSmallValidations: currency must be an ISO 4217 code the provider
// supports, and the audit fields have bounded lengths.
func TestSmallValidations(t *testing.T) {
	t.Parallel()
	e, _, unk := hostileSetup(t)
	before := takeSnapshot(t, e)
	for _, c := range []string{"XXX", "XTS", "XAU", "BOV", "CLF", "USN", "ZZZ", "STD", "xts"} {
		body := `{"order_id":"o","amount":1,"currency":"` + c + `","payment_method":"pm_card_visa"}`
		wantRejected(t, c, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k1", Body: body}), "currency")
	}
	long := func(n int) string { return strings.Repeat("é", n) }
	for _, c := range []struct{ body, field string }{
		{`{"actor":"` + long(101) + `","reason":"r"}`, "actor"},
		{`{"actor":"ops","reason":"` + long(1001) + `"}`, "reason"},
	} {
		wantRejected(t, c.field, e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/payments/" + unk + "/reconcile",
			Bearer: apitest.AdminToken, Body: c.body}), c.field)
		wantRejected(t, c.field, e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/payments/" + unk + "/replay",
			Bearer: apitest.AdminToken, Key: "k1", Body: c.body}), c.field)
	}
	wantUnchanged(t, e, before)

	// At the limits, and in any case, it works.
	r := create(e, "k-jpy", `{"order_id":"o-jpy","amount":2000,"currency":"jpy","payment_method":"pm_card_visa"}`)
	wantStatus(t, r, http.StatusCreated)
	if r.JSON(t)["currency"] != "JPY" {
		t.Fatalf("currency not normalized: %s", r.Body)
	}
	wantStatus(t, create(e, "k-xof", `{"order_id":"o-xof","amount":2000,"currency":"XOF","payment_method":"pm_card_visa"}`), http.StatusCreated)
	wantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/payments/" + unk + "/reconcile",
		Bearer: apitest.AdminToken, Body: `{"actor":"` + long(100) + `","reason":"` + long(1000) + `"}`}), http.StatusOK)
}

// TestWebhookHostileText: a signed event whose strings PostgreSQL cannot
// take is a 400 that stores nothing, not a 500 on every redelivery.
func TestWebhookHostileText(t *testing.T) {
	t.Parallel()
	w := newWebhookEnv(t)
	id, pi := w.authorized(t, "pedido-whtext")
	before := takeSnapshot(t, w.Env)
	for _, payload := range [][]byte{
		piSucceeded(pi+"\x00", id, "manual"),
		intentEvent("evt_a\x00b", "payment_intent.succeeded", intentFields{id: pi, status: "succeeded", captureMethod: "manual", paymentID: id, amount: 2000}),
		intentEvent("evt_other_nul", "customer.created\x00", intentFields{id: pi}),
		intentEvent("evt_meta", "payment_intent.succeeded", intentFields{id: pi, status: "succeeded", captureMethod: "manual", paymentID: id + "\x00", amount: 2000}),
	} {
		r := w.post(w.acctID, payload, signWebhook(payload, w.secret, time.Now()))
		wantRejected(t, string(payload), r, "")
	}
	wantUnchanged(t, w.Env, before)
	w.wantPaymentStatus(t, id, "authorized")
}
