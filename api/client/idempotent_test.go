package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// lossyTransport loses the answer of the first dropFirst requests after
// the service has answered them, and records each request's key and
// whether the store held it before the request left.
type lossyTransport struct {
	next      http.RoundTripper
	keys      KeyStore
	intent    string
	dropFirst int

	mu       sync.Mutex
	sent     []string
	unstored int
}

func (l *lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Header.Get("Idempotency-Key")
	stored, _ := l.keys.LoadOrStore(req.Context(), l.intent, "not-the-key")
	l.mu.Lock()
	l.sent = append(l.sent, key)
	if stored != key {
		l.unstored++
	}
	drop := len(l.sent) <= l.dropFirst
	l.mu.Unlock()
	resp, err := l.next.RoundTrip(req)
	if err != nil || !drop {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errors.New("connection reset after the request was sent")
}

// setup is a service with the simulator behind it and a Creator whose
// transport loses the first dropFirst answers and whose waits are
// recorded instead of slept.
func setup(t *testing.T, intent string, dropFirst int) (*apitest.Env, *Creator, *lossyTransport, *[]time.Duration) {
	t.Helper()
	e := apitest.New(t, apitest.Options{})
	keys := &MemoryKeyStore{}
	lt := &lossyTransport{next: e.HTTPClient().Transport, keys: keys, intent: intent, dropFirst: dropFirst}
	c, err := NewClientWithResponses(e.URL, WithHTTPClient(&http.Client{Transport: lt}),
		WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+e.APIKey)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	cr := &Creator{Client: c, Keys: keys, BaseDelay: time.Millisecond, MaxDelay: 8 * time.Millisecond,
		sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	return e, cr, lt, &waits
}

func checkoutBody(order string) CreatePaymentJSONRequestBody {
	manual := CaptureMethod("manual")
	return CreatePaymentJSONRequestBody{OrderId: order, Amount: 2000, Currency: "BRL",
		PaymentMethod: new("pm_card_visa"), CaptureMethod: &manual}
}

// oneKey fails unless every request carried one key, stored before it left.
func oneKey(t *testing.T, lt *lossyTransport) {
	t.Helper()
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for _, k := range lt.sent {
		if k != lt.sent[0] || len(k) < 40 {
			t.Fatalf("keys sent = %q, want one unpredictable key", lt.sent)
		}
	}
	if lt.unstored != 0 {
		t.Fatalf("%d requests left before their key was stored", lt.unstored)
	}
}

func TestCreatorSurvivesLostAnswers(t *testing.T) {
	t.Parallel()
	// The provider charges and its answer is lost (the service answers
	// 202), and that 202 is itself lost on its way to the caller.
	e, cr, lt, waits := setup(t, "pedido-cli-1", 1)
	e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 1})

	r, err := cr.Create(context.Background(), "pedido-cli-1", checkoutBody("pedido-cli-1"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if r.StatusCode() != http.StatusCreated || r.JSON201 == nil || r.JSON201.Status != "authorized" {
		t.Fatalf("create = %d %s, want 201 authorized", r.StatusCode(), r.Body)
	}
	oneKey(t, lt)
	if len(lt.sent) < 2 || len(*waits) != len(lt.sent)-1 {
		t.Fatalf("%d sends and %d waits, want a retry after the lost answer", len(lt.sent), len(*waits))
	}
	apitest.WantAuthorizations(t, e.Sim, 1)
	sends := 0
	for _, r := range e.Sim.Requests() {
		if r.Op == "authorize" {
			sends++
		}
	}
	if sends < 2 {
		t.Fatalf("%d authorize requests at the provider, want the lost one re-sent", sends)
	}
}

func TestCreatorNeverMakesANewKey(t *testing.T) {
	t.Parallel()
	// Every answer is 202 for a while: the attempts run out with
	// ErrNotFinal, each wait at least the 202's Retry-After.
	e, cr, lt, waits := setup(t, "pedido-cli-2", 0)
	fault := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 100})
	cr.MaxAttempts = 3
	r, err := cr.Create(context.Background(), "pedido-cli-2", checkoutBody("pedido-cli-2"))
	if !errors.Is(err, ErrNotFinal) || r == nil || r.StatusCode() != http.StatusAccepted {
		t.Fatalf("create while unknown = %v, %v; want the 202 and ErrNotFinal", r, err)
	}
	if len(lt.sent) != 3 || len(*waits) != 2 {
		t.Fatalf("%d sends, %d waits; want 3 and 2", len(lt.sent), len(*waits))
	}
	for _, d := range *waits {
		if d < 2*time.Second {
			t.Fatalf("waits = %v, want each at least the 202's Retry-After (2s)", *waits)
		}
	}

	// Later, the same intent: the same key, and still one charge.
	fault.Remove()
	r, err = cr.Create(context.Background(), "pedido-cli-2", checkoutBody("pedido-cli-2"))
	if err != nil || r.StatusCode() != http.StatusCreated {
		t.Fatalf("create again = %v, %v; want 201", r, err)
	}
	oneKey(t, lt)
	apitest.WantAuthorizations(t, e.Sim, 1)
}

func TestCreatorBackoff(t *testing.T) {
	t.Parallel()
	cr := &Creator{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	var got time.Duration
	cr.sleep = func(_ context.Context, d time.Duration) error { got = d; return nil }
	for attempt, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 3: 400 * time.Millisecond, 9: time.Second} {
		for range 50 {
			if err := cr.wait(context.Background(), attempt, nil); err != nil || got < 0 || got > ceiling {
				t.Fatalf("attempt %d waited %v (%v), want within [0, %v]", attempt, got, err, ceiling)
			}
		}
	}
	ra := &CreatePaymentResponse{HTTPResponse: &http.Response{Header: http.Header{"Retry-After": {"7"}}}}
	if err := cr.wait(context.Background(), 1, ra); err != nil || got != 7*time.Second {
		t.Fatalf("with Retry-After: 7 waited %v, want 7s", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (&Creator{}).wait(ctx, 1, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait on a canceled context = %v", err)
	}
}
