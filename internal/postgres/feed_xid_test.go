package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/pgxid"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

// xidConsumer pages through one account's feed as GET /v1/events does,
// keeping its cursor across server restarts.
type xidConsumer struct {
	limit  int
	cursor payment.FeedPosition
	seen   map[string]int
	order  []payment.FeedPosition
}

// poll reads one page and returns how many events it held.
func (c *xidConsumer) poll(ctx context.Context, t *testing.T, store *postgres.PaymentStore) int {
	t.Helper()
	evs, err := store.EventListAfter(ctx, "acct_1", c.cursor, c.limit)
	if err != nil {
		t.Errorf("limit %d: read the feed: %v", c.limit, err)
		return 0
	}
	for _, e := range evs {
		var p struct{ ID string }
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		c.seen[p.ID]++
		c.order = append(c.order, e.Position)
		c.cursor = e.Position
	}
	return len(evs)
}

// xidsBelow is how far below a boundary the writers start; they write
// until they are as far past it.
const xidsBelow = 150

// TestFeedAcrossXidBoundaries moves a private cluster's next xid8 to just
// below a power of ten (its decimal form gets a digit longer: "10000000000"
// sorts before "9999999999" as text) and then just below an epoch (the
// 32-bit xid wraps), and writes across each while writers commit out of xid
// order. Consumers paging at limit 1, 3 and 100 must each be served every
// event exactly once, in increasing position.
func TestFeedAcrossXidBoundaries(t *testing.T) {
	ctx := context.Background()
	c := postgrestest.PrivateCluster(t)
	db, err := postgres.Open(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO accounts (id, name, api_key_hash, stripe_secret_enc, stripe_secret_hmac, created_at)
		VALUES ('acct_1', 'Loja', 'h', 'e', 'm', now())`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	consumers := []*xidConsumer{{limit: 1}, {limit: 3}, {limit: 100}}
	for _, cs := range consumers {
		cs.seen = map[string]int{}
	}
	written := map[string]bool{}
	for _, b := range []pgxid.Boundary{pgxid.PowerOfTen(10), pgxid.Epoch(3)} {
		c.MoveXid(t, b.Xid-xidsBelow)
		from, to := writeAcross(ctx, t, c.URL(), b, consumers, written)
		if crossed := pgxid.Crossed(from, to); len(crossed) == 0 || crossed[len(crossed)-1] != b {
			t.Fatalf("the writers' xids went from %d to %d, crossing %v: not %v", from, to, crossed, b)
		}
		t.Logf("xid8 from %d to %d, crossed %v; %d events written so far", from, to, b, len(written))
	}
	for _, cs := range consumers {
		var lost, twice []string
		for id := range written {
			switch n := cs.seen[id]; {
			case n == 0:
				lost = append(lost, id)
			case n > 1:
				twice = append(twice, id)
			}
		}
		if len(lost)+len(twice) > 0 || len(cs.seen) != len(written) {
			some := append(lost, twice...)
			t.Errorf("limit %d: served %d distinct of %d events; %d never served, %d more than once (%q)",
				cs.limit, len(cs.seen), len(written), len(lost), len(twice), some[:min(len(some), 5)])
		}
		for i := 1; i < len(cs.order); i++ {
			if p, q := cs.order[i-1], cs.order[i]; p.Xid > q.Xid || (p.Xid == q.Xid && p.Seq >= q.Seq) {
				t.Errorf("limit %d: position %s served after %s", cs.limit, q, p)
				break
			}
		}
	}
}

// writeAcross has three writers commit events out of xid order until the
// next xid is past b, while the consumers poll, and then lets the consumers
// drain the feed. It returns the first and last xid a writer got.
func writeAcross(ctx context.Context, t *testing.T, url string, b pgxid.Boundary, consumers []*xidConsumer, written map[string]bool) (from, to uint64) {
	t.Helper()
	db, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := postgres.NewPaymentStore(db)
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	from = ^uint64(0)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				ids, xids, err := writePair(ctx, store, fmt.Sprintf("%s-w%d-%d", b.Name, w, i))
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				mu.Lock()
				for _, id := range ids {
					written[id] = true
				}
				from, to = min(from, xids[0]), max(to, xids[1])
				past := to > b.Xid+xidsBelow
				mu.Unlock()
				if past {
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	drain(ctx, t, store, consumers, done, func() int { mu.Lock(); defer mu.Unlock(); return len(written) })
	return from, to
}

// drain polls with every consumer while the writers run, then until each
// has reached the number of events written or a minute has passed.
func drain(ctx context.Context, t *testing.T, store *postgres.PaymentStore, consumers []*xidConsumer, done <-chan struct{}, total func() int) {
	t.Helper()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		for _, cs := range consumers {
			cs.poll(ctx, t, store)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for _, cs := range consumers {
		// An empty page only means the horizon has not passed yet (a
		// background transaction); a lost event never shows up.
		for len(cs.order) < total() && time.Now().Before(deadline) {
			cs.poll(ctx, t, store)
		}
	}
}

// writePair writes two events in two transactions: the first to take its
// xid commits last.
func writePair(ctx context.Context, store *postgres.PaymentStore, n string) (ids []string, xids [2]uint64, err error) {
	first, second := "evt_"+n+"-a", "evt_"+n+"-b"
	err = store.WithTx(ctx, func(tx payment.Tx) error {
		if xids[0], err = writeEvent(ctx, tx, first); err != nil {
			return err
		}
		return store.WithTx(ctx, func(tx payment.Tx) error {
			xids[1], err = writeEvent(ctx, tx, second)
			return err
		})
	})
	if xids[1] <= xids[0] {
		return nil, xids, fmt.Errorf("the second writer's xid %d is not above the first's %d", xids[1], xids[0])
	}
	return []string{first, second}, xids, err
}

func writeEvent(ctx context.Context, tx payment.Tx, id string) (uint64, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	p := &payment.Payment{ID: "pay_" + id, AccountID: "acct_1", OrderID: id, Attempt: 1, Amount: 100, Currency: "BRL",
		CaptureMethod: "manual", PaymentMethod: "pm_card_visa", Status: payment.StatusProcessing, CreatedAt: now, UpdatedAt: now}
	if err := tx.PaymentInsert(ctx, p); err != nil {
		return 0, err
	}
	if err := tx.EventInsert(ctx, payment.Event{ID: id, AccountID: "acct_1", PaymentID: p.ID,
		Type: "payment.processing", Payload: json.RawMessage(`{"id":"` + id + `"}`), CreatedAt: now}); err != nil {
		return 0, err
	}
	// A read also sends the queued writes.
	var x string
	if err := postgres.RawTx(tx).QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&x); err != nil {
		return 0, err
	}
	return strconv.ParseUint(x, 10, 64)
}
