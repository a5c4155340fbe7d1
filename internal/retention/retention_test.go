package retention_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/retention"
	"github.com/jackc/pgx/v5"
)

// The production defaults, so the tests move time as far as a real
// deployment would.
const (
	responseTTL  = 72 * time.Hour
	tombstoneTTL = 9600 * time.Hour
)

// bundle holds the collaborators of the Purger under test.
type bundle struct {
	*apitest.Env
	store *countingStore
}

func setup(t *testing.T, batchSize int) (*retention.Purger, *bundle) {
	t.Helper()
	e := apitest.New(t, apitest.Options{})
	b := &bundle{Env: e, store: &countingStore{Store: postgres.NewRetentionStore(e.DB)}}
	return newPurger(t, b, b.store, batchSize), b
}

func newPurger(t *testing.T, b *bundle, store retention.Store, batchSize int) *retention.Purger {
	t.Helper()
	p, err := retention.New(retention.Config{
		Store: store, Now: b.Clock.Now, ResponseTTL: responseTTL, TombstoneTTL: tombstoneTTL,
		Interval: time.Hour, BatchSize: batchSize, Logger: b.Logger(),
	})
	if err != nil {
		t.Fatalf("retention.New: %v", err)
	}
	return p
}

// countingStore records the calls that reach the real store.
type countingStore struct {
	retention.Store
	mu     sync.Mutex
	purges []int // rows purged by each PurgeResponses call
}

func (s *countingStore) IdempotencyKeyPurgeResponses(ctx context.Context, before, now time.Time, limit int) (int, error) {
	n, err := s.Store.IdempotencyKeyPurgeResponses(ctx, before, now, limit)
	s.mu.Lock()
	s.purges = append(s.purges, n)
	s.mu.Unlock()
	return n, err
}

var createBody = apitest.CreateBody

func (b *bundle) create(key, body string) *apitest.Response {
	b.T.Helper()
	return b.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: body})
}

// keyRow is the stored idempotency record of a client key.
type keyRow struct {
	State          string
	ResponseStatus *int32
	ResponseBody   []byte
	PurgedAt       *time.Time
	PaymentID      *string
	Fingerprint    []byte
}

// key reads the record of a create key; ok is false when there is none.
func (b *bundle) key(t *testing.T, key string) (r keyRow, ok bool) {
	t.Helper()
	err := b.DB.Pool.QueryRow(context.Background(),
		`SELECT state, response_status, response_body, purged_at, payment_id, fingerprint
		 FROM idempotency_keys WHERE account_id = $1 AND operation = $2 AND key_hash = $3`,
		b.Account.ID, idempotency.OpPaymentsCreate, idempotency.HashKey(key),
	).Scan(&r.State, &r.ResponseStatus, &r.ResponseBody, &r.PurgedAt, &r.PaymentID, &r.Fingerprint)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false
	}
	if err != nil {
		t.Fatalf("read key %q: %v", key, err)
	}
	return r, true
}

func (b *bundle) mustKey(t *testing.T, key string) keyRow {
	t.Helper()
	r, ok := b.key(t, key)
	if !ok {
		t.Fatalf("key %q has no record", key)
	}
	return r
}

func purgeOnce(t *testing.T, p *retention.Purger, want retention.Result) {
	t.Helper()
	got, err := p.PurgeOnce(context.Background())
	if err != nil {
		t.Fatalf("PurgeOnce: %v", err)
	}
	if got != want {
		t.Fatalf("PurgeOnce = %+v, want %+v", got, want)
	}
}

var (
	wantStatus  = apitest.WantStatus
	wantEffects = apitest.WantAuthorizations
)

func TestPurgeOnce(t *testing.T) {
	t.Parallel()

	t.Run("PurgedKeyReplaysCurrentStateWithoutCharging", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, 0)
		first := b.create("k-1", createBody("pedido-1", 2000))
		wantStatus(t, first, http.StatusCreated)
		id := first.JSON(t)["id"]
		before := b.mustKey(t, "k-1")

		b.Clock.Advance(responseTTL + time.Minute)
		purgeOnce(t, p, retention.Result{Purged: 1})

		r := b.mustKey(t, "k-1")
		if r.ResponseBody != nil || r.ResponseStatus != nil {
			t.Fatalf("tombstone keeps response %v %q", r.ResponseStatus, r.ResponseBody)
		}
		// purged_at comes from the injected clock, not the database's.
		if r.PurgedAt == nil || b.Clock.Now().Sub(*r.PurgedAt).Abs() > time.Minute {
			t.Fatalf("purged_at = %v, want about %v", r.PurgedAt, b.Clock.Now())
		}
		if r.State != "completed" || r.PaymentID == nil || *r.PaymentID != id || !bytes.Equal(r.Fingerprint, before.Fingerprint) {
			t.Fatalf("tombstone lost its identity: %+v, payment %v", r, id)
		}

		retry := b.create("k-1", createBody("pedido-1", 2000))
		wantStatus(t, retry, http.StatusOK)
		if got := retry.Header.Get("Idempotent-Replayed"); got != "true" {
			t.Fatalf("Idempotent-Replayed = %q, want true", got)
		}
		got := retry.JSON(t)
		if got["id"] != id || got["status"] != "authorized" {
			t.Fatalf("replayed payment = %s, want %v authorized", retry.Body, id)
		}
		current := b.Do(apitest.Request{Method: http.MethodGet, Path: fmt.Sprintf("/v1/payments/%s", id)})
		wantStatus(t, current, http.StatusOK)
		if !reflect.DeepEqual(got, current.JSON(t)) {
			t.Fatalf("replay is not the current state:\n%s\n%s", retry.Body, current.Body)
		}
		wantEffects(t, b.Sim, 1)

		purgeOnce(t, p, retention.Result{})
	})

	t.Run("PurgedKeyWithDifferentRequestIsReused", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, 0)
		wantStatus(t, b.create("k-1", createBody("pedido-1", 2000)), http.StatusCreated)
		b.Clock.Advance(responseTTL + time.Minute)
		purgeOnce(t, p, retention.Result{Purged: 1})
		before := b.mustKey(t, "k-1")

		r := b.create("k-1", createBody("pedido-1", 2001))
		wantStatus(t, r, http.StatusUnprocessableEntity)
		if got := r.Code(t); got != "idempotency_key_reused" {
			t.Fatalf("code = %q, want idempotency_key_reused", got)
		}
		wantEffects(t, b.Sim, 1)
		if after := b.mustKey(t, "k-1"); !reflect.DeepEqual(after, before) {
			t.Fatalf("tombstone changed:\n%+v\n%+v", before, after)
		}
	})

	t.Run("KeepsResponsesWithinTheWindow", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, 0)
		first := b.create("k-1", createBody("pedido-1", 2000))
		wantStatus(t, first, http.StatusCreated)

		b.Clock.Advance(responseTTL - time.Minute)
		purgeOnce(t, p, retention.Result{})

		if r := b.mustKey(t, "k-1"); r.PurgedAt != nil || r.ResponseBody == nil {
			t.Fatalf("response purged inside its window: %+v", r)
		}
		retry := b.create("k-1", createBody("pedido-1", 2000))
		wantStatus(t, retry, http.StatusCreated)
		if retry.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(retry.Body, first.Body) {
			t.Fatalf("replay differs:\n%s\n%s", first.Body, retry.Body)
		}
		wantEffects(t, b.Sim, 1)
	})

	t.Run("NeverTouchesUnknownKeys", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, 0)
		// Two drops: Go's transport silently re-sends a POST carrying an
		// Idempotency-Key once on a reused connection.
		drop := b.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
		first := b.create("k-lost", createBody("pedido-lost", 2000))
		wantStatus(t, first, http.StatusAccepted)
		drop.Remove()
		before := b.mustKey(t, "k-lost")
		if before.State != "unknown" {
			t.Fatalf("state = %q, want unknown", before.State)
		}

		b.Clock.Advance(tombstoneTTL + 30*24*time.Hour)
		purgeOnce(t, p, retention.Result{})

		if after := b.mustKey(t, "k-lost"); !reflect.DeepEqual(after, before) {
			t.Fatalf("unknown key changed:\n%+v\n%+v", before, after)
		}
		wantEffects(t, b.Sim, 1)
	})

	t.Run("NeverTouchesInProgressKeys", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, 0)
		hold := b.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldAfterEffect, Times: 1})
		held := b.DoAsync(apitest.CreateRequest("k-held", createBody("pedido-held", 2000)))
		apitest.Recv(t, hold.Reached(), "the authorization to take effect at the provider")
		before := b.mustKey(t, "k-held")

		b.Clock.Advance(tombstoneTTL + 30*24*time.Hour)
		purgeOnce(t, p, retention.Result{})

		after := b.mustKey(t, "k-held")
		hold.Release()
		apitest.Recv(t, held, "the held create to finish")
		if before.State != "in_progress" || !reflect.DeepEqual(after, before) {
			t.Fatalf("in-progress key changed:\n%+v\n%+v", before, after)
		}
		wantEffects(t, b.Sim, 1)
	})

	t.Run("DeletesTombstonesAfterTheirWindow", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, 0)
		first := b.create("k-1", createBody("pedido-1", 2000))
		wantStatus(t, first, http.StatusCreated)
		b.Clock.Advance(responseTTL + time.Minute)
		purgeOnce(t, p, retention.Result{Purged: 1})

		// The tombstone window runs from the purge.
		b.Clock.Advance(tombstoneTTL - time.Minute)
		purgeOnce(t, p, retention.Result{})
		if _, ok := b.key(t, "k-1"); !ok {
			t.Fatalf("tombstone deleted inside its window")
		}

		b.Clock.Advance(2 * time.Minute)
		purgeOnce(t, p, retention.Result{Deleted: 1})
		if r, ok := b.key(t, "k-1"); ok {
			t.Fatalf("tombstone not deleted: %+v", r)
		}

		// The key is forgotten; the order's live payment still refuses a
		// second charge.
		retry := b.create("k-1", createBody("pedido-1", 2000))
		wantStatus(t, retry, http.StatusConflict)
		if got := retry.Code(t); got != "order_has_active_payment" {
			t.Fatalf("code = %q, want order_has_active_payment", got)
		}
		if got := retry.JSON(t)["payment_id"]; got != first.JSON(t)["id"] {
			t.Fatalf("payment_id = %v, want %v", got, first.JSON(t)["id"])
		}
		wantEffects(t, b.Sim, 1)
	})

	t.Run("TombstoneWindowStartsAtThePurge", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, 0)
		wantStatus(t, b.create("k-1", createBody("pedido-1", 2000)), http.StatusCreated)
		// The job was not running for longer than both windows: the response
		// is purged, and the tombstone still gets its full window.
		b.Clock.Advance(responseTTL + tombstoneTTL + time.Minute)
		purgeOnce(t, p, retention.Result{Purged: 1})
		if _, ok := b.key(t, "k-1"); !ok {
			t.Fatalf("tombstone deleted in the run that made it")
		}
	})

	t.Run("WorksThroughEveryBatch", func(t *testing.T) {
		t.Parallel()
		p, b := setup(t, 2)
		for i := range 5 {
			wantStatus(t, b.create(fmt.Sprintf("k-%d", i), createBody(fmt.Sprintf("pedido-%d", i), 1000+i)), http.StatusCreated)
		}
		b.Clock.Advance(responseTTL + time.Minute)
		purgeOnce(t, p, retention.Result{Purged: 5})
		if want := []int{2, 2, 1}; !reflect.DeepEqual(b.store.purges, want) {
			t.Fatalf("rows per statement = %v, want %v", b.store.purges, want)
		}
		for i := range 5 {
			if r := b.mustKey(t, fmt.Sprintf("k-%d", i)); r.PurgedAt == nil || r.ResponseBody != nil {
				t.Fatalf("k-%d not purged: %+v", i, r)
			}
		}
	})

	t.Run("InstancesShareTheWork", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, 0)
		const keys = 12
		for i := range keys {
			wantStatus(t, b.create(fmt.Sprintf("k-%d", i), createBody(fmt.Sprintf("pedido-%d", i), 1000+i)), http.StatusCreated)
		}
		const instances = 4
		purgers := make([]*retention.Purger, instances)
		for i := range instances {
			db, err := postgres.Open(context.Background(), b.DBURL)
			if err != nil {
				t.Fatalf("open database: %v", err)
			}
			t.Cleanup(db.Close)
			purgers[i] = newPurger(t, b, postgres.NewRetentionStore(db), 1)
		}
		runAll := func(want retention.Result) {
			t.Helper()
			results := make([]retention.Result, instances)
			errs := make([]error, instances)
			var wg sync.WaitGroup
			for i, p := range purgers {
				wg.Go(func() { results[i], errs[i] = p.PurgeOnce(context.Background()) })
			}
			apitest.Wait(t, &wg, "the purgers")
			var total retention.Result
			for i := range instances {
				if errs[i] != nil {
					t.Fatalf("instance %d: %v", i, errs[i])
				}
				total.Purged += results[i].Purged
				total.Deleted += results[i].Deleted
			}
			if total != want {
				t.Fatalf("instances handled %+v in all (%v), want %+v", total, results, want)
			}
		}
		b.Clock.Advance(responseTTL + time.Minute)
		runAll(retention.Result{Purged: keys})
		b.Clock.Advance(tombstoneTTL + time.Minute)
		runAll(retention.Result{Deleted: keys})
		for i := range keys {
			if r, ok := b.key(t, fmt.Sprintf("k-%d", i)); ok {
				t.Fatalf("k-%d left behind: %+v", i, r)
			}
		}
	})
}
