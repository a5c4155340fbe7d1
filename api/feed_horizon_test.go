package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
)

// heldWriter is one transaction of the account's, written through the
// service's own store: it inserts a payment and its first event, waits to
// be released, writes a second event and commits.
type heldWriter struct {
	id       string
	wrote    chan error // the first event is written, or the error
	release  func()
	released chan struct{}
	finished chan error
}

// startHeldWriter starts writer n; it is released at the end of the test
// at the latest, so a failed test never leaves a transaction open.
func startHeldWriter(t *testing.T, e *apitest.Env, store *postgres.PaymentStore, n int) *heldWriter {
	w := &heldWriter{id: fmt.Sprintf("pay_held%02d", n), wrote: make(chan error, 1), released: make(chan struct{}), finished: make(chan error, 1)}
	w.release = sync.OnceFunc(func() { close(w.released) })
	t.Cleanup(w.release)
	go func() {
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Microsecond)
		first := true
		p := &payment.Payment{ID: w.id, AccountID: e.Account.ID, OrderID: "pedido-" + w.id, Attempt: 1, Amount: 100,
			Currency: "BRL", CaptureMethod: "manual", PaymentMethod: "pm_card_visa", Status: payment.StatusProcessing,
			CreatedAt: now, UpdatedAt: now}
		err := store.WithTx(ctx, func(tx payment.Tx) error {
			if err := tx.PaymentInsert(ctx, p); err != nil {
				return err
			}
			if err := tx.EventInsert(ctx, heldEvent(p, "1")); err != nil {
				return err
			}
			// A read sends the queued writes: the transaction has its xid
			// and its first event on the server before it is held.
			if _, err := tx.PaymentGetByIDForUpdate(ctx, p.AccountID, p.ID); err != nil {
				return err
			}
			if first {
				first = false
				w.wrote <- nil
			}
			<-w.released
			return tx.EventInsert(ctx, heldEvent(p, "2"))
		})
		if first {
			w.wrote <- err
		}
		w.finished <- err
	}()
	return w
}

func heldEvent(p *payment.Payment, n string) payment.Event {
	id := "evt_" + p.ID + "_" + n
	body, _ := json.Marshal(map[string]any{"id": id, "type": "payment.processing", "created_at": payment.FormatTime(p.UpdatedAt), "payment": p})
	return payment.Event{ID: id, AccountID: p.AccountID, PaymentID: p.ID, Type: "payment.processing", Payload: body, CreatedAt: p.UpdatedAt}
}

// feedPoller reads the feed without pause, following next_cursor, until
// stopped; it hands back what it saw and the first error.
type feedPoller struct {
	e     *apitest.Env
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	seen  []string
	polls int
	err   error
	after string
}

func startFeedPoller(e *apitest.Env) *feedPoller {
	p := &feedPoller{e: e, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			if err := p.pollOnce(); err != nil {
				p.mu.Lock()
				p.err = err
				p.mu.Unlock()
				return
			}
		}
	}()
	return p
}

func (p *feedPoller) pollOnce() error {
	r, err := p.e.TryDo(apitest.Request{Method: http.MethodGet, Path: eventsPath(p.after, 2)})
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("GET /v1/events = %d %s", r.Status, r.Body)
	}
	var page struct {
		Data       []feedEvent `json:"data"`
		NextCursor string      `json:"next_cursor"`
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	for _, ev := range page.Data {
		p.seen = append(p.seen, ev.ID)
	}
	p.after = page.NextCursor
	return nil
}

// snapshot is what the poller has seen so far and how many polls it made.
func (p *feedPoller) snapshot() ([]string, int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...), p.polls, p.err
}

// waitPolls waits until the poller has completed n more polls.
func (p *feedPoller) waitPolls(t *testing.T, n int) {
	t.Helper()
	_, start, _ := p.snapshot()
	deadline := time.Now().Add(apitest.WaitTimeout)
	for {
		_, polls, err := p.snapshot()
		if err != nil {
			t.Fatalf("poller: %v", err)
		}
		if polls >= start+n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the poller made %d polls in %v, want %d", polls-start, apitest.WaitTimeout, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFeedHorizon proves the events feed without a per-account lock.
func TestFeedHorizon(t *testing.T) {
	t.Parallel()

	// Writers of one account begin one after the other and commit in the
	// opposite order, the first begun last, while a consumer polls all the
	// time. No writer waits for another (nothing they all lock); the
	// consumer sees every committed event exactly once, in cursor order:
	// by writer in the order they began, each writer's events in the order
	// written. On the feed numbered under a per-account row lock, writer 1
	// waited for writer 0's commit.
	t.Run("FirstBegunCommitsLast", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		store := postgres.NewPaymentStore(e.DB)
		poller := startFeedPoller(e)
		t.Cleanup(func() { close(poller.stop); <-poller.done })

		const writers = 4
		ws := make([]*heldWriter, writers)
		for i := range ws {
			ws[i] = startHeldWriter(t, e, store, i)
			// On a feed that serializes an account's writers this waits for
			// ever: writer i waits for writer 0's commit.
			if err := apitest.Recv(t, ws[i].wrote, fmt.Sprintf("writer %d's first event, while %d writers of the account are open", i, i)); err != nil {
				t.Fatalf("writer %d (begun after %d open writers of the same account): %v", i, i, err)
			}
		}
		// A writer that began later and commits in between, while writer 0
		// (begun first) is still open.
		for i := writers - 1; i >= 1; i-- {
			ws[i].release()
			if err := apitest.Recv(t, ws[i].finished, fmt.Sprintf("writer %d's commit", i)); err != nil {
				t.Fatalf("writer %d: %v", i, err)
			}
			poller.waitPolls(t, 3)
			if seen, _, _ := poller.snapshot(); len(seen) != 0 {
				t.Fatalf("while writer 0 is open the feed served %q: a cursor past them would skip writer 0's events", seen)
			}
		}
		ws[0].release()
		if err := apitest.Recv(t, ws[0].finished, "writer 0's commit"); err != nil {
			t.Fatalf("writer 0: %v", err)
		}
		e.FeedCaughtUp(t)
		// Every event is below the horizon now: polls begun from here on
		// read them all, two a page, and then empty pages.
		want := []string{}
		for _, w := range ws {
			want = append(want, "evt_"+w.id+"_1", "evt_"+w.id+"_2")
		}
		poller.waitPolls(t, len(want)/2+3)
		seen, _, err := poller.snapshot()
		if err != nil {
			t.Fatalf("poller: %v", err)
		}
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("the consumer saw %q, want each event once in the order %q", seen, want)
		}
		// A fresh pass reads the same order.
		var again []string
		for _, ev := range allEvents(t, e, "") {
			again = append(again, ev.ID)
		}
		if fmt.Sprint(again) != fmt.Sprint(want) {
			t.Fatalf("a second pass saw %q, want %q", again, want)
		}
	})

	// A long transaction that has nothing to do with payments (another
	// table, here a plain xid holder) holds the feed back until it ends,
	// and the lag gauge shows it.
	t.Run("LongUnrelatedTransactionHoldsTheFeed", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		ctx := context.Background()
		conn, err := e.DB.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
			t.Fatal(err)
		}

		wantStatus(t, create(e, "k-held-feed", createBody("pedido-held-feed", 100)), http.StatusCreated)
		for range 3 {
			if p := decodePage(t, e.Do(apitest.Request{Method: http.MethodGet, Path: eventsPath("", 100)})); len(p.Data) != 0 {
				t.Fatalf("the feed served %d events while an older transaction runs", len(p.Data))
			}
		}
		var age float64
		if err := tx.QueryRow(ctx, `SELECT EXTRACT(EPOCH FROM clock_timestamp() - now())::float8`).Scan(&age); err != nil {
			t.Fatal(err)
		}
		// The gauge is read after the age: it is at least that old.
		if lag := scrapeMetrics(t, e).get("payments_events_feed_lag_seconds"); lag < age || lag <= 0 {
			t.Fatalf("payments_events_feed_lag_seconds = %v while a transaction %vs old is open, want at least that", lag, age)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(allEvents(t, e, "")); n != 2 {
			t.Fatalf("after the transaction ended the feed served %d events, want 2", n)
		}
	})
}
