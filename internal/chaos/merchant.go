package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// merchant plays the merchant's own systems: a webhook endpoint for every
// event of the account, which checks each signature and counts what it
// gets, so the run can hold the service's deliveries (at least once, across
// the kills) against its events feed.
type merchant struct {
	srv  *http.Server
	url  string
	http *http.Client

	mu      sync.Mutex
	secret  string
	got     map[string]int // webhook-id -> deliveries accepted
	bad     []string       // deliveries refused for their signature
	changed chan struct{}  // closed and replaced at each accepted delivery
	hist    *history       // the accepted deliveries in the order they came
}

// startMerchant listens on a free local port.
func startMerchant() (*merchant, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &merchant{url: "http://" + ln.Addr().String(), http: &http.Client{Timeout: 30 * time.Second},
		got: map[string]int{}, changed: make(chan struct{}), hist: &history{}}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

func (m *merchant) close() { _ = m.srv.Close() }

func (m *merchant) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	m.mu.Lock()
	defer m.mu.Unlock()
	id := r.Header.Get("webhook-id")
	if err == nil {
		var wh *standardwebhooks.Webhook
		if wh, err = standardwebhooks.NewWebhook(m.secret); err == nil {
			err = wh.Verify(body, r.Header)
		}
	}
	if err != nil {
		m.bad = append(m.bad, fmt.Sprintf("%s: %v", id, err))
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	m.got[id]++
	m.hist.hook(id, body)
	close(m.changed)
	m.changed = make(chan struct{})
	w.WriteHeader(http.StatusNoContent)
}

// register creates the endpoint through a replica, retrying until one
// answers (the key makes the retries one endpoint).
func (m *merchant) register(ctx context.Context, base, apiKey string) error {
	body, _ := json.Marshal(map[string]any{"url": m.url, "enabled_events": []string{"*"}})
	for try := 0; ; try++ {
		var ep struct {
			Secret string `json:"secret"`
		}
		status, b, err := m.call(ctx, http.MethodPost, base+"/v1/webhook_endpoints", apiKey, "chaos-merchant", body)
		if err == nil && status == http.StatusCreated {
			if err := json.Unmarshal(b, &ep); err != nil || ep.Secret == "" {
				return fmt.Errorf("chaos: webhook endpoint created as %q", b)
			}
			m.mu.Lock()
			m.secret = ep.Secret
			m.mu.Unlock()
			return nil
		}
		if try == 20 || ctx.Err() != nil {
			return fmt.Errorf("chaos: register the merchant's webhook endpoint: %d %s %v", status, b, err)
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// feed reads every event id of the account's events feed, limit a page.
func (m *merchant) feed(ctx context.Context, base, apiKey string, limit int) ([]string, error) {
	var ids []string
	for after := ""; ; {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if after != "" {
			q.Set("after", after)
		}
		status, b, err := m.call(ctx, http.MethodGet, base+"/v1/events?"+q.Encode(), apiKey, "", nil)
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("chaos: GET /v1/events: %d %s", status, b)
		}
		var page struct {
			Data       []struct{ ID string } `json:"data"`
			HasMore    bool                  `json:"has_more"`
			NextCursor string                `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, err
		}
		for _, ev := range page.Data {
			ids = append(ids, ev.ID)
		}
		if !page.HasMore {
			return ids, nil
		}
		after = page.NextCursor
	}
}

// await waits until every id of want was accepted at least once, or ctx
// ends.
func (m *merchant) await(ctx context.Context, want []string) {
	for {
		m.mu.Lock()
		missing := false
		for _, id := range want {
			if m.got[id] == 0 {
				missing = true
				break
			}
		}
		changed := m.changed
		m.mu.Unlock()
		if !missing {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// snapshot copies what was received.
func (m *merchant) snapshot() (map[string]int, []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	got := make(map[string]int, len(m.got))
	for id, n := range m.got {
		got[id] = n
	}
	return got, append([]string(nil), m.bad...)
}

func (m *merchant) call(ctx context.Context, method, target, apiKey, key string, body []byte) (int, []byte, error) {
	var rdr io.Reader
	if body != nil {
		rdr = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rdr)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// merchantTally is what the merchant's endpoint got against the feed.
type merchantTally struct {
	Events        int // in the account's events feed at the end
	Received      int // of those, delivered at least once
	Lost          int // of those, never delivered
	Duplicates    int // deliveries beyond the first of an event
	BadSignatures int // deliveries whose signature did not verify
	Later         int // events delivered that the last read of the feed did not serve yet
}

// checkMerchant holds the deliveries against the feed: every event of the
// feed must have arrived, each signed; duplicates are allowed (at least
// once) and counted.
func (r *Report) checkMerchant(feed []string, got map[string]int, bad []string) {
	t := merchantTally{Events: len(feed), BadSignatures: len(bad)}
	inFeed := make(map[string]bool, len(feed))
	var lost []string
	for _, id := range feed {
		inFeed[id] = true
		if got[id] == 0 {
			lost = append(lost, id)
		}
	}
	t.Lost = len(lost)
	t.Received = len(feed) - t.Lost
	for id, n := range got {
		t.Duplicates += n - 1
		if !inFeed[id] {
			t.Later++
		}
	}
	sort.Strings(lost)
	for _, id := range lost {
		r.sample("lost webhook: event %s is in the feed but never reached the merchant's endpoint", id)
	}
	for _, b := range bad {
		r.sample("bad webhook signature: %s", b)
	}
	r.Merchant = t
}
