package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// listening runs `payments webhooks listen` in-process with args until the
// test ends or stop is called; it returns the listener's URL, its stdout
// and stderr, and stop.
func listening(t *testing.T, getenv func(string) string, args ...string) (url string, stdout, stderr *apitest.SyncBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &apitest.SyncBuffer{}, &apitest.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"webhooks", "listen"}, args...), getenv, stdout, stderr)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := apitest.Recv(t, done, "the listener to stop"); err != nil {
				t.Errorf("listener stopped with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	re := regexp.MustCompile(`listening on (http://\S+/)`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			return m[1], stdout, stderr, stop
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("listener exited: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("listener did not start:\n%s", stderr.String())
		}
	}
}

// signed is the Standard Webhooks headers of id signed at `at` over body
// with secret ("" signs nothing).
func signed(t *testing.T, secret, id string, at time.Time, body string) http.Header {
	t.Helper()
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	if secret != "" {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign(id, at, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		h.Set("webhook-signature", sig)
	}
	return h
}

// send POSTs body with h to url and returns the status.
func send(t *testing.T, url string, h http.Header, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// post sends body signed with secret.
func post(t *testing.T, url, secret, id string, at time.Time, body string) int {
	t.Helper()
	return send(t, url, signed(t, secret, id, at, body), body)
}

const (
	listenSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherSecret  = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
)

// A correctly signed event is printed and answered 2xx; a repeat is marked;
// a tampered body, a wrong secret, a stale timestamp or no signature is
// answered 400 and printed on stderr only.
func TestWebhooksListenVerifies(t *testing.T) {
	t.Parallel()
	url, stdout, stderr, _ := listening(t, env("WEBHOOK_SECRET", listenSecret), "--addr", "127.0.0.1:0")
	body := `{"id":"evt_1","object":"event","type":"payment.captured","created_at":"2026-12-03T10:00:00Z",` +
		`"payment":{"id":"pay_1","object":"payment","status":"captured","version":4},"cursor":"c_42"}`
	now := time.Now()
	if code := post(t, url, listenSecret, "evt_1", now, body); code/100 != 2 {
		t.Fatalf("signed event: %d, want 2xx", code)
	}
	want := "evt_1 payment.captured payment=pay_1 status=captured version=4 cursor=c_42\n"
	if got := stdout.String(); got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
	if code := post(t, url, listenSecret, "evt_1", now, body); code/100 != 2 {
		t.Fatalf("the same event again: %d, want 2xx", code)
	}
	if got := stdout.String(); got != want+strings.TrimSuffix(want, "\n")+" (repeat)\n" {
		t.Fatalf("after a repeat, stdout %q", got)
	}

	printed := stdout.String()
	tampered := strings.Replace(body, `"version":4`, `"version":5`, 1)
	for name, c := range map[string]struct {
		secret string
		at     time.Time
		sent   string // the body sent; the signature is always over body
	}{
		"TamperedBody":   {listenSecret, now, tampered},
		"WrongSecret":    {otherSecret, now, body},
		"StaleTimestamp": {listenSecret, now.Add(-10 * time.Minute), body},
		"NoSignature":    {"", now, body},
	} {
		id := "evt_bad_" + name
		if code := send(t, url, signed(t, c.secret, id, c.at, body), c.sent); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, code)
		}
		if !strings.Contains(stderr.String(), fmt.Sprintf("rejected webhook-id=%q", id)) {
			t.Errorf("%s: no line on stderr:\n%s", name, stderr.String())
		}
	}
	if got := stdout.String(); got != printed {
		t.Fatalf("rejected requests reached stdout: %q", strings.TrimPrefix(got, printed))
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d, want 405", resp.StatusCode)
	}
	if strings.Contains(stderr.String(), listenSecret) || strings.Contains(stdout.String(), listenSecret) {
		t.Fatalf("the secret was printed")
	}
}

// --secret wins over WEBHOOK_SECRET.
func TestWebhooksListenSecretFlag(t *testing.T) {
	t.Parallel()
	url, stdout, _, _ := listening(t, env("WEBHOOK_SECRET", otherSecret), "--addr", "127.0.0.1:0", "--secret", listenSecret)
	body := `{"id":"evt_2","type":"webhook_endpoint.disabled","webhook_endpoint":{"id":"we_1","status":"disabled"},"cursor":"c_7"}`
	if code := post(t, url, otherSecret, "evt_2", time.Now(), body); code != http.StatusBadRequest {
		t.Fatalf("signed with WEBHOOK_SECRET: %d, want 400", code)
	}
	if code := post(t, url, listenSecret, "evt_2", time.Now(), body); code/100 != 2 {
		t.Fatalf("signed with --secret: %d, want 2xx", code)
	}
	if got, want := stdout.String(), "evt_2 webhook_endpoint.disabled webhook_endpoint=we_1 status=disabled cursor=c_7\n"; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
}

// waitFor waits until buf contains every one of want.
func waitFor(t *testing.T, buf *apitest.SyncBuffer, what string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := false
		for _, w := range want {
			if !strings.Contains(buf.String(), w) {
				missing = true
			}
		}
		if !missing {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30s:\n%s", what, buf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitDelivered waits until every delivery job of an event is completed.
func waitDelivered(t *testing.T, e *apitest.Env, eventID string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		err := e.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job
			WHERE args->>'event_id' = $1 AND state <> 'completed'`, eventID).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery of %s is not completed after 30s", eventID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// --register against the real service: the listener registers itself,
// the service's delivery worker sends a payment's events, signed, and the
// listener verifies and prints them; a redelivery is marked a repeat. A
// second run at the same address reuses the endpoint with a new secret
// instead of leaving one behind that signs with a secret nobody knows.
func TestWebhooksListenRegister(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the real binary; skipped in -short")
	}
	e := apitest.New(t, apitest.Options{})
	p := start(t, e, buildBinary(t, ""), "WEBHOOK_ALLOW_PRIVATE=true")
	// The in-process instance refuses local URLs, as a production one does.
	err := run(context.Background(), []string{"webhooks", "listen", "--addr", "127.0.0.1:0", "--register", "--api-url", e.URL},
		env("PAYMENTS_API_KEY", e.APIKey), io.Discard, io.Discard)
	if err == nil || isUsageError(err) || !strings.Contains(err.Error(), "needs WEBHOOK_ALLOW_PRIVATE=true") || strings.Contains(err.Error(), e.APIKey) {
		t.Fatalf("registering with a service that refuses local URLs: %v", err)
	}

	addr := freeAddr(t)
	args := []string{"--addr", addr, "--register", "--api-url", p.url}

	url, stdout, stderr, stop := listening(t, env("PAYMENTS_API_KEY", e.APIKey), args...)
	if url != "http://"+addr+"/" || !regexp.MustCompile(`endpoint we_\S+ registered at `).MatchString(stderr.String()) {
		t.Fatalf("url %s, stderr:\n%s", url, stderr.String())
	}
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "listen-1",
		Body: apitest.CreateBody("pedido-listen-1", 2000), BaseURL: p.url})
	apitest.WantStatus(t, r, http.StatusCreated)
	pay := r.JSON(t)["id"].(string)
	waitFor(t, stdout, "delivered events", " payment.processing payment="+pay+" ", " payment.authorized payment="+pay+" status=authorized ")
	line := regexp.MustCompile(`(?m)^(evt_\S+) payment\.authorized payment=` + pay + ` status=authorized version=\d+ cursor=\S+$`).FindStringSubmatch(stdout.String())
	if line == nil {
		t.Fatalf("no full line for payment.authorized:\n%s", stdout.String())
	}
	// A redeliver while the delivery is still running adds nothing: wait
	// until River has marked it completed.
	waitDelivered(t, e, line[1])
	e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/events/" + line[1] + "/redeliver", BaseURL: p.url})
	waitFor(t, stdout, "the redelivery", line[0]+" (repeat)")
	stop()
	if strings.Contains(stderr.String(), "rejected webhook-id") {
		t.Fatalf("a delivery was rejected:\n%s", stderr.String())
	}

	// Again at the same address, the key as a flag this time.
	_, stdout, stderr, _ = listening(t, env(), append(args, "--api-key", e.APIKey)...)
	if !strings.Contains(stderr.String(), "reused (secret rotated)") {
		t.Fatalf("second run did not reuse the endpoint:\n%s", stderr.String())
	}
	r = e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "listen-2",
		Body: apitest.CreateBody("pedido-listen-2", 2000), BaseURL: p.url})
	apitest.WantStatus(t, r, http.StatusCreated)
	waitFor(t, stdout, "delivered events", " payment.authorized payment="+r.JSON(t)["id"].(string)+" ")
	list := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/webhook_endpoints", BaseURL: p.url}).JSON(t)
	if n := len(list["data"].([]any)); n != 1 {
		t.Fatalf("%d endpoints after two runs, want 1", n)
	}
	for _, out := range []string{stdout.String(), stderr.String()} {
		if strings.Contains(out, e.APIKey) || strings.Contains(out, "whsec_") {
			t.Fatalf("a secret was printed:\n%s", out)
		}
	}
}

// Endpoints at the listener's URL beyond the one it reuses sign with
// secrets it does not know: --register names them on stderr.
func TestWebhooksListenRegisterWarnsOfSameURL(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
	addr := freeAddr(t)
	self := "http://" + addr + "/"
	var ids []string
	for _, key := range []string{"same-1", "same-2"} {
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: key,
			Body: fmt.Sprintf(`{"url":%q,"enabled_events":["*"]}`, self)})
		apitest.WantStatus(t, r, http.StatusCreated)
		ids = append(ids, r.JSON(t)["id"].(string))
	}
	_, _, stderr, stop := listening(t, env("PAYMENTS_API_KEY", e.APIKey), "--addr", addr, "--register", "--api-url", e.URL)
	stop()
	out := stderr.String()
	reused := fmt.Sprintf("endpoint %s reused (secret rotated)", min(ids[0], ids[1]))
	warning := fmt.Sprintf("warning: 1 other endpoint(s) also deliver to %s", self)
	if !strings.Contains(out, reused) || !strings.Contains(out, warning) || !strings.Contains(out, max(ids[0], ids[1])) {
		t.Fatalf("stderr does not reuse one endpoint and name the other:\n%s", out)
	}

	// A listener alone at its URL prints no warning.
	_, _, stderr, stop = listening(t, env("PAYMENTS_API_KEY", e.APIKey), "--addr", freeAddr(t), "--register", "--api-url", e.URL)
	stop()
	if out := stderr.String(); !strings.Contains(out, " registered at ") || strings.Contains(out, "warning") {
		t.Fatalf("a new endpoint alone at its URL:\n%s", out)
	}
}
