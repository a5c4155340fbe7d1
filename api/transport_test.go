package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/api"
	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/metrics"
	"github.com/acmepay/payments/internal/payment"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes walks the service's router: pattern → methods it serves.
func routes(t *testing.T, e *apitest.Env) map[string][]string {
	t.Helper()
	srv, err := api.New(api.Config{Payments: e.Payments, Reconciler: e.Reconciler, Accounts: e.Accounts, Ready: e.DB,
		Metrics: metrics.New(nil, nil, nil), Logger: e.Logger(), Operations: e.Operations, Inbound: e.Inbound})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	err = chi.Walk(srv.Handler().(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out[route] = append(out[route], method)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("walked %d routes, want every route of the service: %v", len(out), out)
	}
	return out
}

var pathParam = regexp.MustCompile(`\{[a-z_]+\}`)

// fill makes a concrete path of a route pattern.
func fill(pattern string, params map[string]string) string {
	return pathParam.ReplaceAllStringFunc(pattern, func(p string) string {
		if v, ok := params[p[1:len(p)-1]]; ok {
			return v
		}
		return "x_unknown"
	})
}

// rawDo sends a request built by hand (repeated header lines, made-up
// methods), authorized for the path's API, bypassing the harness's openapi
// check, which knows only the documented methods.
func rawDo(t *testing.T, e *apitest.Env, method, path string, body []byte, header http.Header) *apitest.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case strings.HasPrefix(path, "/admin/"):
		req.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
	case strings.HasPrefix(path, "/v1/"):
		req.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	for k, vs := range header {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// TestMetricsCardinality: made-up methods and paths must not create series.
// Each of them used to add a request series (the raw method was a label), so
// a handful of unauthenticated requests grew memory and /metrics for ever.
func TestMetricsCardinality(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	junk := func(i int) {
		t.Helper()
		method := fmt.Sprintf("JUNK%d", i)
		paths := []string{fmt.Sprintf("/junk-%d", i), fmt.Sprintf("/v1/junk-%d", i), fmt.Sprintf("/admin/v1/junk/%d", i),
			fmt.Sprintf("/v1/payments/pay_x/junk-%d", i)}
		r := rawDo(t, e, method, paths[i%len(paths)], nil, nil)
		if r.Status != http.StatusMethodNotAllowed && r.Status != http.StatusNotFound {
			t.Fatalf("%s %s = %d %s, want 404 or 405", method, paths[i%len(paths)], r.Status, r.Body)
		}
		// An unknown path with a known method, under each mount.
		r = rawDo(t, e, http.MethodGet, paths[(i+1)%len(paths)]+"/more", nil, nil)
		wantStatus(t, r, http.StatusNotFound)
	}
	// series counts the service's series, and lists the method labels.
	series := func() (int, []string) {
		t.Helper()
		var n int
		var methods []string
		for _, s := range scrapeMetrics(t, e) {
			// The runtime's own series (go_, process_) come and go with
			// garbage collections, not with requests.
			if !strings.HasPrefix(s.name, "payments_") {
				continue
			}
			n++
			if s.name == "payments_http_requests_total" && !slices.Contains(methods, s.labels["method"]) {
				methods = append(methods, s.labels["method"])
			}
		}
		return n, methods
	}
	// One of each kind first, and a scrape, so that the fixed series exist.
	for i := range 8 {
		junk(i)
	}
	scrapeMetrics(t, e)
	before, _ := series()
	for i := 8; i < 1000; i++ {
		junk(i)
	}
	after, methods := series()
	if after != before {
		t.Errorf("/metrics has %d series after 1,000 made-up methods and paths, %d before: label values are not from a fixed set", after, before)
	}
	var odd []string
	for _, m := range methods {
		if !slices.Contains([]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "other"}, m) {
			odd = append(odd, m)
		}
	}
	if len(odd) > 0 {
		t.Errorf("%d method label values are not from the fixed set, such as %q", len(odd), odd[:min(3, len(odd))])
	}
	sc := scrapeMetrics(t, e)
	if got := sc.get("payments_http_requests_total", "method", "other", "route", "unmatched"); got < 1000 {
		t.Errorf("%v requests counted as method other on route unmatched, want 1000", got)
	}
	if got := sc.get("payments_http_requests_total", "method", "GET", "route", "unmatched", "status", "404"); got < 1000 {
		t.Errorf("%v unknown paths counted on route unmatched, want 1000", got)
	}
}

// TestIdempotencyKeyTwice: a request with the header twice, even with equal
// values, is refused before anything is reserved: the client cannot know
// which of the two would count.
func TestIdempotencyKeyTwice(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	body := []byte(createBody("pedido-two-keys", 2000))
	for _, keys := range [][]string{{"k-two", "k-two"}, {"k-two", "k-other"}, {"", "k-two"}} {
		r := rawDo(t, e, http.MethodPost, "/v1/payments", body,
			http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": keys})
		wantProblem(t, r, http.StatusBadRequest, "idempotency_key_invalid")
	}
	wantEffects(t, e.Sim, 0)

	// Nothing was reserved: the key works alone, as a new request.
	r := create(e, "k-two", string(body))
	wantStatus(t, r, http.StatusCreated)
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the first valid request was answered as a replay")
	}
	id := r.JSON(t)["id"].(string)

	// The same rule on the other keyed operations.
	for _, path := range []string{"/v1/payments/" + id + "/capture", "/v1/payments/" + id + "/cancel",
		"/v1/payments/" + id + "/refunds"} {
		r := rawDo(t, e, http.MethodPost, path, []byte(`{"amount":100}`),
			http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k-op", "k-op"}})
		wantProblem(t, r, http.StatusBadRequest, "idempotency_key_invalid")
	}
	if p := getPaymentJSON(t, e, id); p["status"] != "authorized" || p["amount_captured"] != float64(0) {
		t.Fatalf("payment = %v, want authorized and not captured", p)
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestContentEncoding: a body with a content coding is refused with 415 on
// every route that takes a body, before anything is reserved; identity, in
// any case, is the body as it is.
func TestContentEncoding(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	body := createBody("pedido-encoded", 2000)
	for _, ce := range [][]string{{"gzip"}, {"GZIP"}, {"identity, gzip"}, {"identity", "br"}, {"x-made-up"}} {
		r := rawDo(t, e, http.MethodPost, "/v1/payments", gzipped(t, body),
			http.Header{"Content-Type": {"application/json"}, "Content-Encoding": ce, "Idempotency-Key": {"k-enc"}})
		wantProblem(t, r, http.StatusUnsupportedMediaType, "unsupported_media_type")
		if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("Content-Encoding %q: Content-Type %q, want application/problem+json", ce, ct)
		}
	}
	wantEffects(t, e.Sim, 0)

	// The same key, sent plain with identity named, is a new request.
	for i, ce := range []string{"identity", "Identity , IDENTITY", ""} {
		key := fmt.Sprintf("k-enc-%d", i)
		if i == 0 {
			key = "k-enc"
		}
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key,
			Body: createBody(fmt.Sprintf("pedido-encoded-%d", i), 2000), Headers: map[string]string{"Content-Encoding": ce}})
		wantStatus(t, r, http.StatusCreated)
		if r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("Content-Encoding %q: answered as a replay", ce)
		}
	}

	// Every route that takes a body, through the documented responses.
	w := newWebhookEnv(t)
	for pattern, methods := range routes(t, w.Env) {
		if !slices.Contains(methods, http.MethodPost) {
			continue
		}
		path := fill(pattern, map[string]string{"id": "pay_x", "account_id": w.acctID})
		req := apitest.Request{Method: http.MethodPost, Path: path, Key: "k-enc-route", Body: `{"amount":100}`,
			Headers: map[string]string{"Content-Encoding": "gzip", "Stripe-Signature": "t=1,v1=00"}}
		switch {
		case strings.HasPrefix(path, "/admin/"):
			req.Bearer = apitest.AdminToken
		case strings.HasPrefix(path, "/webhooks/"):
			req.Bearer = "-"
		}
		r := w.Do(req)
		wantProblem(t, r, http.StatusUnsupportedMediaType, "unsupported_media_type")
	}
	if n := countDeliveries(t, w.Env); n != 0 {
		t.Fatalf("%d webhook deliveries stored, want none", n)
	}
}

// TestHeadOnGetRoutes: HEAD on every GET route answers as GET, without the
// body.
func TestHeadOnGetRoutes(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	id := authorized(t, e, "pedido-head", 2000)
	queries := map[string]string{"/v1/payments": "?order_id=pedido-head"}
	n := 0
	for pattern, methods := range routes(t, e) {
		if !slices.Contains(methods, http.MethodGet) {
			continue
		}
		n++
		fillWith := map[string]string{"id": id}
		if strings.HasPrefix(pattern, "/admin/v1/accounts/") {
			fillWith["id"] = e.Account.ID
		}
		path := fill(pattern, fillWith) + queries[pattern]
		get := rawDo(t, e, http.MethodGet, path, nil, nil)
		head := rawDo(t, e, http.MethodHead, path, nil, nil)
		// The payment's id names no discrepancy and no refund: both answer
		// 404 there.
		want := http.StatusOK
		if strings.HasPrefix(pattern, "/admin/v1/discrepancies/") || strings.HasPrefix(pattern, "/v1/refunds/") {
			want = http.StatusNotFound
		}
		if head.Status != get.Status || get.Status != want {
			t.Errorf("HEAD %s = %d, GET = %d %s; want both %d", path, head.Status, get.Status, get.Body, want)
			continue
		}
		if len(head.Body) != 0 {
			t.Errorf("HEAD %s has a %d-byte body, want none", path, len(head.Body))
		}
		if head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
			t.Errorf("HEAD %s Content-Type %q, GET %q", path, head.Header.Get("Content-Type"), get.Header.Get("Content-Type"))
		}
		if pattern != "/metrics" && head.Header.Get("Content-Length") != get.Header.Get("Content-Length") {
			t.Errorf("HEAD %s Content-Length %q, GET %q", path, head.Header.Get("Content-Length"), get.Header.Get("Content-Length"))
		}
		if head.Header.Get("X-Request-Id") == "" {
			t.Errorf("HEAD %s has no X-Request-Id", path)
		}
	}
	if n < 7 {
		t.Fatalf("checked %d GET routes, want every one", n)
	}
	// HEAD is counted as HEAD on its route.
	if got := scrapeMetrics(t, e).get("payments_http_requests_total", "route", "/v1/payments/{id}", "method", "HEAD", "status", "200"); got != 1 {
		t.Errorf("HEAD /v1/payments/{id} counted %v times, want 1", got)
	}
}

// TestMethodNotAllowedAllow: every 405 of every route lists the route's
// methods in Allow (HEAD wherever GET is served).
func TestMethodNotAllowedAllow(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	for pattern, methods := range routes(t, e) {
		var want []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
			if slices.Contains(methods, m) {
				want = append(want, m)
				if m == http.MethodGet {
					want = append(want, http.MethodHead)
				}
			}
		}
		path := fill(pattern, map[string]string{"id": "pay_x", "account_id": e.Account.ID})
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
			http.MethodDelete, http.MethodOptions, http.MethodTrace, "BREW"} {
			if slices.Contains(want, m) {
				continue
			}
			r := rawDo(t, e, m, path, nil, nil)
			if r.Status != http.StatusMethodNotAllowed {
				t.Errorf("%s %s = %d, want 405", m, path, r.Status)
				continue
			}
			if got := r.Header.Get("Allow"); got != strings.Join(want, ", ") {
				t.Errorf("%s %s: Allow %q, want %q", m, path, got, strings.Join(want, ", "))
			}
			if m != http.MethodHead && r.Code(t) != "method_not_allowed" {
				t.Errorf("%s %s: code %q, want method_not_allowed", m, path, r.Code(t))
			}
		}
	}
}

// stallingStore holds a read of one payment until the request's context
// ends, as a slow query would.
type stallingStore struct {
	payment.Store
	id      string
	reached chan struct{}
}

func (s *stallingStore) PaymentGetByID(ctx context.Context, accountID, id string) (*payment.Payment, error) {
	if id != s.id {
		return s.Store.PaymentGetByID(ctx, accountID, id)
	}
	s.reached <- struct{}{}
	<-ctx.Done()
	return nil, fmt.Errorf("read payment: %w", ctx.Err())
}

// TestClientDisconnect: a client that goes away mid-request is counted as
// 499 and logged as a disconnect, never as a 500 or at level ERROR (an
// alert on 5xx or error logs would fire on every impatient shopper).
func TestClientDisconnect(t *testing.T) {
	t.Parallel()
	stall := &stallingStore{id: "pay_stalled", reached: make(chan struct{}, 1)}
	e := apitest.New(t, apitest.Options{WrapStore: func(s payment.Store) payment.Store {
		stall.Store = s
		return stall
	}})
	// An instance of its own, so that its logs and metrics are this test's
	// alone and closing it waits for its handlers to finish.
	logs := &apitest.SyncBuffer{}
	m := metrics.New(nil, nil, nil)
	srv, err := api.New(api.Config{Payments: e.Payments, Reconciler: e.Reconciler, Accounts: e.Accounts, Ready: e.DB, Metrics: m,
		Logger: logging.New(logs, slog.LevelDebug), Operations: e.Operations, Inbound: e.Inbound})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	active := make(chan string, 4)
	hs.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateActive {
			active <- c.RemoteAddr().String()
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)

	// Gone while the service reads the database.
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/v1/payments/pay_stalled", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.APIKey)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	apitest.Recv(t, stall.reached, "the request to reach the database")
	cancel()
	if err := apitest.Recv(t, errc, "the canceled request to return"); err == nil {
		t.Fatal("the canceled request was answered")
	}

	// Gone while sending the body: 10 of the 100 bytes announced.
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(conn, "POST /v1/payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nIdempotency-Key: k-gone\r\nContent-Length: 100\r\n\r\n{\"order_id", e.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	// Closed only once the server reads the request: closing the server
	// then waits for its handler.
	for addr := ""; addr != conn.LocalAddr().String(); {
		addr = apitest.Recv(t, active, "the server to read the request")
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}

	hs.Close() // waits for both handlers

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	var sc scrape
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		sc = append(sc, s)
	}
	for _, c := range []struct{ route, method string }{{"/v1/payments/{id}", "GET"}, {"/v1/payments", "POST"}} {
		if got := sc.get("payments_http_requests_total", "route", c.route, "method", c.method, "status", "499"); got != 1 {
			t.Errorf("%s %s counted %v times as 499, want 1", c.method, c.route, got)
		}
		if got := sc.get("payments_http_requests_total", "route", c.route, "method", c.method); got != 1 {
			t.Errorf("%s %s counted %v times in all, want once, as 499", c.method, c.route, got)
		}
	}
	out := logs.String()
	if strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("a client disconnect was logged at level ERROR:\n%s", out)
	}
	if got := strings.Count(out, `"msg":"client disconnected"`); got != 2 {
		t.Errorf("%d disconnects logged, want 2:\n%s", got, out)
	}
	wantEffects(t, e.Sim, 0)
}

// TestWebhookTimestampAndID: an event signed in the future beyond the
// tolerance, and an event without an id, are refused and change nothing.
// A small clock difference ahead is accepted, as one behind is.
func TestWebhookTimestampAndID(t *testing.T) {
	t.Parallel()
	refused := func(t *testing.T, w *webhookEnv, id string, r *apitest.Response) {
		t.Helper()
		wantProblem(t, r, http.StatusBadRequest, "invalid_request")
		if n := countDeliveries(t, w.Env); n != 0 {
			t.Fatalf("%d deliveries stored, want none", n)
		}
		w.wantPaymentStatus(t, id, "authorized")
	}

	t.Run("FutureBeyondTolerance", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-future")
		payload := piSucceeded(piID, id, "manual")
		refused(t, w, id, w.post(w.acctID, payload, signWebhook(payload, w.secret, time.Now().Add(10*time.Minute))))
		if got := scrapeMetrics(t, w.Env).get("payments_webhook_deliveries_total", "outcome", "rejected"); got != 1 {
			t.Errorf("%v deliveries counted as rejected, want 1", got)
		}
	})

	t.Run("SlightlyAhead", func(t *testing.T) {
		t.Parallel()
		w := newWebhookEnv(t)
		id, piID := w.authorized(t, "pedido-ahead")
		payload := piSucceeded(piID, id, "manual")
		r := w.post(w.acctID, payload, signWebhook(payload, w.secret, time.Now().Add(time.Minute)))
		wantStatus(t, r, http.StatusOK)
		w.wantPaymentStatus(t, id, "captured")
	})

	for name, eventID := range map[string]string{"WithoutID": "", "EmptyID": `"id":"",`} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWebhookEnv(t)
			id, piID := w.authorized(t, "pedido-noid")
			payload := piSucceeded(piID, id, "manual")
			stripped := bytes.Replace(payload, []byte(`"id":"evt_`+piID+`",`), []byte(eventID), 1)
			if bytes.Equal(stripped, payload) {
				t.Fatalf("the event id was not removed from %s", payload)
			}
			refused(t, w, id, w.post(w.acctID, stripped, signWebhook(stripped, w.secret, time.Now())))
		})
	}
}
