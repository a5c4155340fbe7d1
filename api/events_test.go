package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// feedEvent is one event of GET /v1/events.
type feedEvent struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	CreatedAt string         `json:"created_at"`
	Payment   map[string]any `json:"payment"`
	// WebhookEndpoint is set on webhook_endpoint.disabled instead of Payment.
	WebhookEndpoint map[string]any `json:"webhook_endpoint"`
}

// feedPage is one page of GET /v1/events.
type feedPage struct {
	Object     string      `json:"object"`
	Data       []feedEvent `json:"data"`
	HasMore    bool        `json:"has_more"`
	NextCursor any         `json:"next_cursor"`
}

// cursor is next_cursor, which must always be a string.
func (p feedPage) cursor(t testing.TB) string {
	t.Helper()
	c, ok := p.NextCursor.(string)
	if !ok {
		t.Fatalf("next_cursor = %#v, want a string", p.NextCursor)
	}
	return c
}

func eventsPath(after string, limit int) string {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	if len(q) == 0 {
		return "/v1/events"
	}
	return "/v1/events?" + q.Encode()
}

func decodePage(t testing.TB, r *apitest.Response) feedPage {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/events = %d %s", r.Status, r.Body)
	}
	var p feedPage
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("decode events page %s: %v", r.Body, err)
	}
	if p.Object != "list" || p.Data == nil {
		t.Fatalf("events page %s, want a list with data", r.Body)
	}
	return p
}

// eventsPage reads one page of an account's feed (bearer "" is the Env's
// own account), once the feed serves every event committed before the call.
func eventsPage(t testing.TB, e *apitest.Env, bearer, after string, limit int) feedPage {
	t.Helper()
	e.FeedCaughtUp(t)
	return decodePage(t, e.Do(apitest.Request{Method: http.MethodGet, Path: eventsPath(after, limit), Bearer: bearer}))
}

// allEvents reads an account's whole feed, page by page.
func allEvents(t testing.TB, e *apitest.Env, bearer string) []feedEvent {
	t.Helper()
	var out []feedEvent
	after := ""
	for {
		p := eventsPage(t, e, bearer, after, 100)
		out = append(out, p.Data...)
		after = p.cursor(t)
		if !p.HasMore {
			return out
		}
	}
}

// paymentEvents is the feed of one payment, in order.
func paymentEvents(t testing.TB, e *apitest.Env, bearer, paymentID string) []feedEvent {
	t.Helper()
	var out []feedEvent
	for _, ev := range allEvents(t, e, bearer) {
		if ev.Payment["id"] == paymentID {
			out = append(out, ev)
		}
	}
	return out
}

// wantTypes checks the event types in order, and that each snapshot shows
// the status its type names.
func wantTypes(t testing.TB, evs []feedEvent, want ...string) {
	t.Helper()
	got := make([]string, 0, len(evs))
	for _, ev := range evs {
		got = append(got, ev.Type)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("event types = %q, want %q", got, want)
	}
	for _, ev := range evs {
		if ev.Type != "payment.refunded" && !strings.HasSuffix(ev.Type, "_failed") && ev.Type != "payment."+fmt.Sprint(ev.Payment["status"]) {
			t.Fatalf("event %s %s carries a payment in status %v", ev.ID, ev.Type, ev.Payment["status"])
		}
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()

	t.Run("CreateEmitsProcessingThenAuthorized", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		r := create(e, "k-ev", createBody("pedido-ev", 2000))
		wantStatus(t, r, http.StatusCreated)
		id := r.JSON(t)["id"].(string)
		evs := allEvents(t, e, "")
		wantTypes(t, evs, "payment.processing", "payment.authorized")
		for _, ev := range evs {
			if ev.Payment["id"] != id {
				t.Fatalf("event %s is about %v, want %s", ev.ID, ev.Payment["id"], id)
			}
		}
		if evs[0].ID == evs[1].ID {
			t.Fatalf("two events share the id %s", evs[0].ID)
		}
		if last := evs[1].Payment; !reflect.DeepEqual(last, r.JSON(t)) {
			t.Fatalf("the last snapshot %v differs from the answer %s", last, r.Body)
		}
		// A replay writes nothing.
		create(e, "k-ev", createBody("pedido-ev", 2000))
		if again := allEvents(t, e, ""); !reflect.DeepEqual(again, evs) {
			t.Fatalf("the feed changed after a replay: %v", again)
		}
	})

	t.Run("AutomaticCaptureSkipsAuthorized", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		r := create(e, "k-auto", `{"order_id":"pedido-auto","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`)
		wantStatus(t, r, http.StatusCreated)
		wantTypes(t, allEvents(t, e, ""), "payment.processing", "payment.captured")
	})

	t.Run("Paging", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		for i := range 3 {
			wantStatus(t, create(e, fmt.Sprint("k-page-", i), createBody(fmt.Sprint("pedido-page-", i), 2000)), http.StatusCreated)
		}
		all := allEvents(t, e, "")
		if len(all) != 6 {
			t.Fatalf("%d events, want 6", len(all))
		}

		first := eventsPage(t, e, "", "", 4)
		if len(first.Data) != 4 || !first.HasMore {
			t.Fatalf("first page: %d events, has_more %v; want 4, true", len(first.Data), first.HasMore)
		}
		second := eventsPage(t, e, "", first.cursor(t), 4)
		if len(second.Data) != 2 || second.HasMore {
			t.Fatalf("second page: %d events, has_more %v; want 2, false", len(second.Data), second.HasMore)
		}
		if got := append(first.Data, second.Data...); !reflect.DeepEqual(got, all) {
			t.Fatalf("pages %v differ from the whole feed %v", got, all)
		}
		// At the end: an empty page with the same cursor, to keep polling.
		end := second.cursor(t)
		for range 2 {
			p := eventsPage(t, e, "", end, 4)
			if len(p.Data) != 0 || p.HasMore || p.cursor(t) != end {
				t.Fatalf("past the end: %d events, has_more %v, cursor %q; want none, false, %q", len(p.Data), p.HasMore, p.cursor(t), end)
			}
		}
		// A new event shows up after that cursor.
		wantStatus(t, create(e, "k-page-3", createBody("pedido-page-3", 2000)), http.StatusCreated)
		next := eventsPage(t, e, "", end, 4)
		wantTypes(t, next.Data, "payment.processing", "payment.authorized")
		// Exactly fitting a page: has_more is false.
		exact := eventsPage(t, e, "", "", 8)
		if len(exact.Data) != 8 || exact.HasMore {
			t.Fatalf("exact page: %d events, has_more %v; want 8, false", len(exact.Data), exact.HasMore)
		}
	})

	t.Run("EmptyFeedHasAStringCursor", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		p := eventsPage(t, e, "", "", 0)
		if len(p.Data) != 0 || p.HasMore {
			t.Fatalf("fresh feed: %d events, has_more %v", len(p.Data), p.HasMore)
		}
		c := p.cursor(t)
		wantStatus(t, create(e, "k-1", createBody("pedido-1", 2000)), http.StatusCreated)
		wantTypes(t, eventsPage(t, e, "", c, 0).Data, "payment.processing", "payment.authorized")
	})

	t.Run("OtherAccountsNeverSeeThem", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		wantStatus(t, create(e, "k-1", createBody("pedido-1", 2000)), http.StatusCreated)
		_, otherKey := e.CreateAccount("Outra Loja", "sk_test_other_account")
		p := eventsPage(t, e, otherKey, "", 0)
		if len(p.Data) != 0 || p.HasMore {
			t.Fatalf("another account sees %d events", len(p.Data))
		}
		// Not with a cursor either.
		if p := eventsPage(t, e, otherKey, "0", 0); len(p.Data) != 0 {
			t.Fatalf("another account sees %d events after cursor 0", len(p.Data))
		}
		// And its own events are its own.
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-1", Body: createBody("pedido-1", 2000), Bearer: otherKey})
		wantStatus(t, r, http.StatusCreated)
		theirs := allEvents(t, e, otherKey)
		wantTypes(t, theirs, "payment.processing", "payment.authorized")
		for _, ev := range theirs {
			if ev.Payment["id"] != r.JSON(t)["id"] {
				t.Fatalf("the other account sees event %s about %v", ev.ID, ev.Payment["id"])
			}
		}
		if len(allEvents(t, e, "")) != 2 {
			t.Fatalf("the first account's feed changed")
		}
	})

	t.Run("RejectsBadParameters", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		for _, path := range []string{"/v1/events?after=abc", "/v1/events?after=-1", "/v1/events?limit=0", "/v1/events?limit=101", "/v1/events?limit=x"} {
			r := e.Do(apitest.Request{Method: http.MethodGet, Path: path})
			if r.Status != http.StatusBadRequest || r.Code(t) != "invalid_request" {
				t.Fatalf("%s: got %d %s, want 400 invalid_request", path, r.Status, r.Body)
			}
		}
		if r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/events", Bearer: "-"}); r.Status != http.StatusUnauthorized {
			t.Fatalf("without an API key: %d, want 401", r.Status)
		}
	})

	// Writers create payments (half manual, half automatic capture) while
	// a reader polls with its cursor in small pages; it stops at the first
	// empty page read after every writer finished and the feed caught up
	// with their commits. It sees every event
	// once, each payment's in order.
	concurrentFeed := func(t *testing.T, e *apitest.Env, writers int, whileHeld func(poll func() []feedEvent)) {
		t.Helper()
		var (
			wg   sync.WaitGroup
			done atomic.Bool
			ids  = make(chan string, writers)
		)
		start := make(chan struct{})
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				body := createBody(fmt.Sprint("pedido-conc-", i), 2000)
				if i%2 == 1 {
					body = fmt.Sprintf(`{"order_id":"pedido-conc-%d","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`, i)
				}
				r, err := e.TryDo(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: fmt.Sprint("k-conc-", i), Body: body})
				if err != nil {
					t.Error(err)
					return
				}
				var p struct{ ID string }
				if r.Status != http.StatusCreated || json.Unmarshal(r.Body, &p) != nil {
					t.Errorf("create = %d %s, want 201", r.Status, r.Body)
					return
				}
				ids <- p.ID
			}()
		}
		go func() {
			wg.Wait()
			done.Store(true)
		}()

		var seen []feedEvent
		after := ""
		// Both polling loops end only when the writers do: bound them.
		deadline := time.Now().Add(apitest.WaitTimeout)
		poll := func() []feedEvent {
			if time.Now().After(deadline) {
				t.Fatalf("the writers had not finished after %v; the reader saw %d events", apitest.WaitTimeout, len(seen))
			}
			r, err := e.TryDo(apitest.Request{Method: http.MethodGet, Path: eventsPath(after, 3)})
			if err != nil {
				t.Fatal(err)
			}
			p := decodePage(t, r)
			seen = append(seen, p.Data...)
			after = p.cursor(t)
			return p.Data
		}
		close(start)
		if whileHeld != nil {
			whileHeld(poll)
		}
		for {
			finished := done.Load()
			if finished {
				// The writers' last commits may still be above the horizon.
				e.FeedCaughtUp(t)
			}
			if got := poll(); finished && len(got) == 0 {
				break
			}
		}
		close(ids)
		if t.Failed() {
			t.FailNow()
		}

		byID := map[string]bool{}
		perPayment := map[string][]string{}
		for _, ev := range seen {
			if byID[ev.ID] {
				t.Fatalf("event %s seen twice", ev.ID)
			}
			byID[ev.ID] = true
			pid := ev.Payment["id"].(string)
			perPayment[pid] = append(perPayment[pid], ev.Type)
		}
		created := 0
		for id := range ids {
			created++
			types := perPayment[id]
			if len(types) != 2 || types[0] != "payment.processing" ||
				(types[1] != "payment.authorized" && types[1] != "payment.captured") {
				t.Fatalf("payment %s: events %q, want processing then its final state", id, types)
			}
		}
		if created != writers || len(seen) != 2*writers || len(perPayment) != writers {
			t.Fatalf("saw %d events about %d payments of %d created; want %d about %d", len(seen), len(perPayment), created, 2*writers, writers)
		}
		if !reflect.DeepEqual(seen, allEvents(t, e, "")) {
			t.Fatalf("the polled events differ from the feed read at once")
		}
	}

	t.Run("ConcurrentWritersAReaderSeesEveryEventOnce", func(t *testing.T) {
		t.Parallel()
		concurrentFeed(t, apitest.New(t, apitest.Options{}), 20, nil)
	})

	t.Run("ReaderPollsBetweenEachPaymentsTwoWrites", func(t *testing.T) {
		t.Parallel()
		// A long provider timeout: the writers wait at the provider until
		// the reader has seen every first event.
		e := apitest.New(t, apitest.Options{ProviderTimeout: time.Minute, Lease: 2 * time.Minute})
		const writers = 20
		hold := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldAfterEffect, Times: writers})
		concurrentFeed(t, e, writers, func(poll func() []feedEvent) {
			n := 0
			for n < writers {
				for _, ev := range poll() {
					if ev.Type != "payment.processing" {
						t.Fatalf("saw %s while every authorization is held", ev.Type)
					}
					n++
				}
			}
			hold.Release()
		})
	})
}
