package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/notify"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// rescueWait bounds the wait for a delivery cut short by a kill: River
// rescues it notify.RescueAfter after its attempt began, on a pass of its
// rescuer (every 30 s) once the restarted process leads (within ~20 s of
// the kill), plus slack for a loaded machine.
const rescueWait = notify.RescueAfter + 30*time.Second /* leadership */ + 30*time.Second /* a pass */ + 30*time.Second

// delivery is one request a merchant receiver got.
type delivery struct {
	id  string
	err error // of the signature check
}

// merchant is a webhook receiver that checks every signature and keeps
// the ids it accepted. hold, when set, is called with the first delivery
// and keeps the request until it returns.
type merchant struct {
	secret atomic.Value // string, set once the endpoint exists
	hold   func(r *http.Request)
	held   atomic.Bool
	// delay, when set, is how long a delivery takes to be answered.
	delay func() time.Duration
	// inFlight counts the deliveries being answered; entered gets a value
	// (when it has room) as one begins.
	inFlight atomic.Int64
	dropped  atomic.Int64 // deliveries whose sender died before the answer
	entered  chan struct{}

	mu       sync.Mutex
	accepted map[string]int // webhook-id -> deliveries accepted
	bad      []string       // deliveries refused, for the failure message
	changed  chan struct{}  // closed and replaced at each accepted delivery
	got      chan delivery  // every delivery after the held one, when not nil
}

func newMerchant() *merchant {
	return &merchant{accepted: map[string]int{}, changed: make(chan struct{}), entered: make(chan struct{}, 1)}
}

func (m *merchant) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if m.hold != nil && m.held.CompareAndSwap(false, true) {
		m.hold(r)
		return
	}
	m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	select {
	case m.entered <- struct{}{}:
	default:
	}
	body, err := io.ReadAll(r.Body)
	if m.delay != nil {
		time.Sleep(m.delay()) // a merchant's processing time
		if r.Context().Err() != nil {
			// The service died before the answer: count the delivery as
			// not taken, so only a new delivery can make up for it.
			m.dropped.Add(1)
			return
		}
	}
	if err == nil {
		var wh *standardwebhooks.Webhook
		secret, _ := m.secret.Load().(string)
		if wh, err = standardwebhooks.NewWebhook(secret); err == nil {
			err = wh.Verify(body, r.Header)
		}
	}
	id := r.Header.Get("webhook-id")
	if m.got != nil {
		m.got <- delivery{id: id, err: err}
	}
	if err != nil {
		m.mu.Lock()
		m.bad = append(m.bad, fmt.Sprintf("%s: %v", id, err))
		m.mu.Unlock()
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.accepted[id]++
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// missing returns the ids of want not accepted yet, and a channel closed
// at the next accepted delivery.
func (m *merchant) missing(want map[string]bool) ([]string, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id := range want {
		if m.accepted[id] == 0 {
			out = append(out, id)
		}
	}
	return out, m.changed
}

// registerMerchant creates an endpoint for every event type on the
// receiver and hands the receiver its secret.
func registerMerchant(t *testing.T, e *apitest.Env, m *merchant, url string) {
	t.Helper()
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: "k-endpoint",
		Body: fmt.Sprintf(`{"url":%q,"enabled_events":["*"]}`, url)})
	apitest.WantStatus(t, r, http.StatusCreated)
	m.secret.Store(r.JSON(t)["secret"].(string))
}

// TestWebhookDeliveryCrash kills the service while a merchant holds a
// delivery: the restarted service delivers the same event again, signed.
func TestWebhookDeliveryCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills the real binary and waits for River's rescue (about a minute); skipped in -short")
	}
	e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
	m := newMerchant()
	held := make(chan string, 1)
	release := make(chan struct{})
	m.hold = func(r *http.Request) {
		// Read to the end: the server watches the connection, and so ends
		// the request's context when the killed service's side drops, only
		// once the body is consumed.
		_, _ = io.Copy(io.Discard, r.Body)
		held <- r.Header.Get("webhook-id")
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
	m.got = make(chan delivery, 16)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for handlers
	registerMerchant(t, e, m, srv.URL)

	bin := buildBinary(t, "")
	p := start(t, e, bin, "WEBHOOK_ALLOW_PRIVATE=true")
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-hook-crash",
		Body: apitest.CreateBody("pedido-hook-crash", 2000), BaseURL: p.url})
	apitest.WantStatus(t, r, http.StatusCreated)
	first := apitest.Recv(t, held, "the first delivery to reach the merchant")
	p.kill(t)
	killed := time.Now()
	p2 := start(t, e, bin, "WEBHOOK_ALLOW_PRIVATE=true")

	deadline := time.NewTimer(rescueWait)
	defer deadline.Stop()
	for {
		select {
		case d := <-m.got:
			if d.err != nil {
				t.Fatalf("delivery of %s after the restart: signature %v", d.id, d.err)
			}
			if d.id != first {
				continue // the other event of the create
			}
		case <-deadline.C:
			t.Fatalf("%s was not delivered again within %v of the restart", first, rescueWait)
		}
		break
	}
	t.Logf("%s delivered again %v after the kill", first, time.Since(killed).Round(time.Second))
	// The service took the 2xx: the attempt is recorded as a success.
	for {
		r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/events/" + first + "/deliveries", BaseURL: p2.url})
		apitest.WantStatus(t, r, http.StatusOK)
		var page struct {
			Data []struct{ Outcome string } `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		if n := len(page.Data); n > 0 && page.Data[n-1].Outcome == notify.OutcomeSucceeded {
			break
		}
		select {
		case <-deadline.C:
			t.Fatalf("no succeeded attempt of %s recorded: %s", first, r.Body)
		case <-time.After(50 * time.Millisecond): // the attempt is recorded right after the answer
		}
	}
}

// TestWebhookDeliveryRandomKills creates payments through the real binary
// while it is SIGKILLed at random moments and restarted, then checks that
// the merchant got every event of the feed at least once. Duplicates are
// allowed (at least once) and logged.
func TestWebhookDeliveryRandomKills(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills the real binary many times and waits for River's rescue (about a minute); skipped in -short")
	}
	const (
		payments = 500 // two events each: payment.processing, payment.authorized
		senders  = 8
	)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x1000))

	e := apitest.New(t, apitest.Options{WebhookAllowPrivate: true})
	m := newMerchant()
	// Answers take up to 50 ms, so that kills find deliveries in flight.
	var rngMu sync.Mutex
	m.delay = func() time.Duration {
		rngMu.Lock()
		defer rngMu.Unlock()
		return time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
	}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	registerMerchant(t, e, m, srv.URL)
	bin := buildBinary(t, "")
	p := start(t, e, bin, "WEBHOOK_ALLOW_PRIVATE=true")
	var current atomic.Pointer[proc]
	current.Store(p)

	// Senders retry each create like a client until it is final; a kill
	// shows as a transport error, a 409 or a 202.
	next := atomic.Int64{}
	failures := make(chan string, senders)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > payments {
					return
				}
				key, body := fmt.Sprintf("k-kill-%d", i), apitest.CreateBody(fmt.Sprintf("pedido-kill-%d", i), 1000+int(i))
				for try := 0; ; try++ {
					r, err := e.TryDo(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: body, BaseURL: current.Load().url})
					if err == nil && r.Status == http.StatusCreated {
						break
					}
					if try == 200 {
						failures <- fmt.Sprintf("%s: no 201 after %d tries (last error %v, response %+v)", key, try, err, r)
						return
					}
					time.Sleep(100 * time.Millisecond) // the client's back-off
				}
			}
		}()
	}
	began := time.Now()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	killAfter := func() time.Duration {
		rngMu.Lock()
		defer rngMu.Unlock()
		return 300*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
	}
	// Kills go on until the creates are done and minKills happened; each
	// waits a moment for a delivery in flight, the case that needs River's
	// rescue.
	const minKills = 5
	kills, midDelivery := 0, 0
	produced := time.NewTimer(2 * time.Minute)
	defer produced.Stop()
	created := done
loop:
	for {
		select {
		case <-created:
			created = nil
			if kills >= minKills {
				break loop
			}
			continue
		case f := <-failures:
			t.Fatal(f)
		case <-produced.C:
			t.Fatalf("the %d creates did not end within 2 minutes (%d kills)", payments, kills)
		case <-time.After(killAfter()):
		}
		select {
		case <-m.entered:
		case <-time.After(500 * time.Millisecond):
		}
		if m.inFlight.Load() > 0 {
			midDelivery++
		}
		current.Load().kill(t)
		kills++
		current.Store(start(t, e, bin, "WEBHOOK_ALLOW_PRIVATE=true"))
		if created == nil && kills >= minKills {
			break
		}
	}
	select {
	case f := <-failures:
		t.Fatal(f)
	default:
	}
	t.Logf("%d payments created; %d kills (%d with a delivery in flight) in %v", payments, kills, midDelivery, time.Since(began).Round(time.Second))

	// Every event of the feed, then the receiver until it has them all.
	e.FeedCaughtUp(t)
	want := map[string]bool{}
	for after := ""; ; {
		path := "/v1/events?limit=100"
		if after != "" {
			path += "&after=" + after
		}
		r := e.Do(apitest.Request{Method: http.MethodGet, Path: path, BaseURL: current.Load().url})
		apitest.WantStatus(t, r, http.StatusOK)
		var page struct {
			Data       []struct{ ID string } `json:"data"`
			HasMore    bool                  `json:"has_more"`
			NextCursor string                `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Data {
			want[ev.ID] = true
		}
		if !page.HasMore {
			break
		}
		after = page.NextCursor
	}
	if len(want) < 2*payments {
		t.Fatalf("the feed holds %d events, want at least %d", len(want), 2*payments)
	}
	deadline := time.NewTimer(rescueWait)
	defer deadline.Stop()
	for {
		lost, changed := m.missing(want)
		if len(lost) == 0 {
			break
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%d of %d events never reached the merchant within %v (%d kills), e.g. %v",
				len(lost), len(want), rescueWait, kills, lost[:min(len(lost), 5)])
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.bad) > 0 {
		t.Fatalf("%d deliveries failed the signature check, e.g. %s", len(m.bad), m.bad[0])
	}
	dups := 0
	for id, n := range m.accepted {
		if !want[id] {
			t.Errorf("the merchant got %s, which the feed does not have", id)
		}
		dups += n - 1
	}
	t.Logf("%d events, all delivered %v after the start; %d duplicate deliveries, %d cut short by a kill (%d kills)",
		len(want), time.Since(began).Round(time.Second), dups, m.dropped.Load(), kills)
}
