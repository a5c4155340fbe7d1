package providersim

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
)

const (
	keyA = "sk_test_account_a"
	keyB = "sk_test_account_b"
)

// fakeClock is a settable Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	sim  *Server
	url  string
	http *http.Client
}

func start(t *testing.T, opts Options) *env {
	t.Helper()
	sim := New(opts)
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	t.Cleanup(sim.ClearFaults) // runs first, so held requests cannot block Close
	return &env{sim: sim, url: ts.URL, http: ts.Client()}
}

// client is a real stripe-go client pointed at the simulator, without retries.
func (e *env) client(key string) *client.API {
	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(e.url),
		HTTPClient:        e.http,
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return client.New(key, &stripe.Backends{API: b, Connect: b, Uploads: b})
}

// raw sends a request by hand, for what stripe-go cannot send or hides.
func (e *env) raw(t *testing.T, method, path, auth, idemKey string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	res, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

func authorize(idemKey, pm, captureMethod string, amount int64, paymentID string) *stripe.PaymentIntentParams {
	p := &stripe.PaymentIntentParams{
		Amount:        stripe.Int64(amount),
		Currency:      stripe.String("brl"),
		Confirm:       stripe.Bool(true),
		PaymentMethod: stripe.String(pm),
		CaptureMethod: stripe.String(captureMethod),
		Metadata:      map[string]string{"payment_id": paymentID},
	}
	if idemKey != "" {
		p.SetIdempotencyKey(idemKey)
	}
	return p
}

func withKey[P interface{ SetIdempotencyKey(string) }](p P, key string) P {
	p.SetIdempotencyKey(key)
	return p
}

// stripeErr asserts err is a Stripe API error with the given status.
func stripeErr(t *testing.T, err error, status int) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v (%T), want *stripe.Error", err, err)
	}
	if se.HTTPStatusCode != status {
		t.Fatalf("status = %d, want %d (%v)", se.HTTPStatusCode, status, se)
	}
	return se
}

func wantStats(t *testing.T, got, want Stats) {
	t.Helper()
	if got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
}

// eventually polls cond for a few seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recv returns the next value from ch, or fails the test after a few
// seconds: a goroutine that is stuck fails the test instead of hanging it.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// wait waits for wg like recv.
func wait(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	recv(t, done, what)
}
