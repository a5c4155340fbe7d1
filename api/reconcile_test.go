package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/reconcile"
)

// runOnce makes one reconciliation pass with svc (the first instance's
// service when nil), claiming attempts of any age.
func runOnce(t *testing.T, e *apitest.Env, svc *payment.Service) reconcile.Summary {
	t.Helper()
	if svc == nil {
		svc = e.Payments
	}
	r, err := reconcile.New(reconcile.Config{Payments: svc, Store: e.ReconcileStore(), Now: e.ServiceClock(), Accounts: e.Accounts, After: 0})
	if err != nil {
		t.Fatalf("reconciler: %v", err)
	}
	sum, err := r.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	return sum
}

func wantSummary(t *testing.T, got reconcile.Summary, examined int, resolved map[string]int, stillUnknown int) {
	t.Helper()
	want := reconcile.Summary{Examined: examined, Resolved: resolved, StillUnknown: stillUnknown}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("summary = %+v, want %+v", got, want)
	}
}

// createUnknown creates a payment whose answer is 202 unknown and returns it.
func createUnknown(t *testing.T, e *apitest.Env, key, body string) map[string]any {
	t.Helper()
	r := create(e, key, body)
	wantStatus(t, r, http.StatusAccepted)
	p := r.JSON(t)
	if p["status"] != "unknown" {
		t.Fatalf("status = %v, want unknown; body %s", p["status"], r.Body)
	}
	return p
}

// dropAuthorize makes the next authorization take effect at the provider
// while its answer is lost. Two drops: Go's transport silently re-sends a
// POST carrying an Idempotency-Key once on a reused connection.
func dropAuthorize(e *apitest.Env) *providersim.Injected {
	return e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
}

func getPaymentJSON(t *testing.T, e *apitest.Env, id string) map[string]any {
	t.Helper()
	r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id})
	wantStatus(t, r, http.StatusOK)
	return r.JSON(t)
}

// opRequests lists the provider keys of every request of one operation the
// simulator received (replays and failed requests included).
func opRequests(sim *providersim.Server, op string) []string {
	var keys []string
	for _, r := range sim.Requests() {
		if r.Op == op {
			keys = append(keys, r.IdempotencyKey)
		}
	}
	return keys
}

func wantKeys(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("provider keys = %q, want %q", got, want)
	}
}

// wantOnlyKey asserts every send carried key. How many sends a dropped
// connection causes depends on net/http, which re-sends a request carrying an
// Idempotency-Key when a reused connection breaks before any answer.
func wantOnlyKey(t *testing.T, got []string, key string) {
	t.Helper()
	if len(got) == 0 {
		t.Fatalf("no provider sends, want some with key %q", key)
	}
	for _, k := range got {
		if k != key {
			t.Fatalf("provider keys = %q, want only %q", got, key)
		}
	}
}

// adminView is GET /admin/v1/payments/{id}.
type adminView struct {
	Payment  map[string]any `json:"payment"`
	Attempts []struct {
		Operation   string `json:"operation"`
		Number      int    `json:"number"`
		ProviderKey string `json:"provider_key"`
		Status      string `json:"status"`
	} `json:"attempts"`
	Audit []struct {
		Actor   string         `json:"actor"`
		Action  string         `json:"action"`
		Reason  string         `json:"reason"`
		Details map[string]any `json:"details"`
	} `json:"audit"`
}

func adminGet(t *testing.T, e *apitest.Env, id string) adminView {
	t.Helper()
	r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments/" + id, Bearer: apitest.AdminToken})
	wantStatus(t, r, http.StatusOK)
	var v adminView
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decode admin view %s: %v", r.Body, err)
	}
	return v
}

// resolutions counts the audit entries the background reconciler wrote.
func (v adminView) resolutions() int {
	n := 0
	for _, a := range v.Audit {
		if a.Actor == "reconciler" {
			n++
		}
	}
	return n
}

func TestReconcile(t *testing.T) {
	t.Parallel()

	t.Run("TimeoutAfterRemoteSuccessResolvesToAuthorized", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{ProviderTimeout: 200 * time.Millisecond, Lease: 5 * time.Second})
		slow := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DelayAfterEffect, Delay: 2 * time.Second, Times: 1})
		// The search does not show the intent yet: the recovery's lookup
		// finds nothing, and the key's replay answers.
		e.Sim.SetSearchLag(time.Hour)
		body := createBody("pedido-rc-slow", 2000)
		p := createUnknown(t, e, "k-rc-slow", body)
		if slow.Hits() != 1 {
			t.Fatalf("the delay fault was not hit")
		}
		wantEffects(t, e.Sim, 1)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
		got := getPaymentJSON(t, e, p["id"].(string))
		if got["status"] != "authorized" || got["provider_payment_id"] == nil {
			t.Fatalf("payment after reconciliation = %v", got)
		}
		wantEffects(t, e.Sim, 1)
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-rc-slow:autorizar-v1", "pedido-rc-slow:autorizar-v1")

		retry := create(e, "k-rc-slow", body)
		wantStatus(t, retry, http.StatusCreated)
		if retry.Header.Get("Idempotent-Replayed") != "true" || retry.JSON(t)["status"] != "authorized" {
			t.Fatalf("retry after reconciliation: %v %s", retry.Header, retry.Body)
		}
		wantEffects(t, e.Sim, 1)
		if n := adminGet(t, e, p["id"].(string)).resolutions(); n != 1 {
			t.Fatalf("reconciler audit entries = %d, want 1", n)
		}
		// Nothing is left for the next pass.
		wantSummary(t, runOnce(t, e, nil), 0, map[string]int{}, 0)
	})

	t.Run("ErrorBeforeEffectResendsSameProviderKey", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
		p := createUnknown(t, e, "k-rc-500", createBody("pedido-rc-500", 2000))
		wantEffects(t, e.Sim, 0)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
		if got := getPaymentJSON(t, e, p["id"].(string)); got["status"] != "authorized" {
			t.Fatalf("status = %v, want authorized", got["status"])
		}
		wantEffects(t, e.Sim, 1)
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-rc-500:autorizar-v1", "pedido-rc-500:autorizar-v1")
	})

	t.Run("StillFailingProviderStaysUnknown", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		down := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect})
		p := createUnknown(t, e, "k-rc-down", createBody("pedido-rc-down", 2000))
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{}, 1)
		if got := getPaymentJSON(t, e, p["id"].(string)); got["status"] != "unknown" {
			t.Fatalf("status = %v, want unknown", got["status"])
		}
		down.Remove()
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
		wantEffects(t, e.Sim, 1)
	})

	t.Run("StillUnknownAttemptIsNotLeftLeasedByThePass", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		down := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect})
		orders := []string{"pedido-left-a", "pedido-left-b", "pedido-left-c"}
		for _, o := range orders {
			createUnknown(t, e, "k-"+o, createBody(o, 100))
		}
		// The pass claims one attempt at a time and must not claim what it
		// already examined.
		r, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(), Accounts: e.Accounts, After: 0})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := r.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		wantSummary(t, sum, 3, map[string]int{}, 3)
		down.Remove()
		// Nobody works on these attempts now: each client's retry recovers
		// its own, instead of waiting out a lease nobody uses.
		for _, o := range orders {
			retry := create(e, "k-"+o, createBody(o, 100))
			wantStatus(t, retry, http.StatusCreated)
		}
		wantEffects(t, e.Sim, 3)
	})

	t.Run("ClientRetryWhileReconcilerCallsIsInUse", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
		body := createBody("pedido-rc-busy", 2000)
		createUnknown(t, e, "k-rc-busy", body)
		hold := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldBeforeEffect, Times: 1})
		r, err := reconcile.New(reconcile.Config{Payments: e.Payments, Store: e.ReconcileStore(), Now: e.ServiceClock(), Accounts: e.Accounts, After: 0})
		if err != nil {
			t.Fatalf("reconciler: %v", err)
		}
		type pass struct {
			sum reconcile.Summary
			err error
		}
		done := make(chan pass, 1)
		go func() {
			sum, err := r.RunOnce(context.Background())
			done <- pass{sum, err}
		}()
		apitest.Recv(t, hold.Reached(), "the reconciler's authorization to reach the provider")
		busy := create(e, "k-rc-busy", body)
		wantProblem(t, busy, http.StatusConflict, "idempotency_key_in_use")
		hold.Release()
		p := apitest.Recv(t, done, "the reconciliation pass")
		if p.err != nil {
			t.Fatalf("RunOnce: %v", p.err)
		}
		wantSummary(t, p.sum, 1, map[string]int{"authorized": 1}, 0)
		retry := create(e, "k-rc-busy", body)
		wantStatus(t, retry, http.StatusCreated)
		if retry.Header.Get("Idempotent-Replayed") != "true" || retry.JSON(t)["status"] != "authorized" {
			t.Fatalf("retry after the reconciler finished: %s", retry.Body)
		}
		wantEffects(t, e.Sim, 1)
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-rc-busy:autorizar-v1", "pedido-rc-busy:autorizar-v1")
	})

	t.Run("ExpiredLeaseWhileHolderStillCallsNeverChargesTwice", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		hold := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldBeforeEffect, Times: 1})
		body := createBody("pedido-rc-held", 2000)
		got := e.DoAsync(apitest.CreateRequest("k-rc-held", body))
		apitest.Recv(t, hold.Reached(), "the holder's authorization to reach the provider")
		// The holder looks dead: its lease has passed. The reconciler takes the
		// attempt over with the same provider key, which the provider still
		// has in flight.
		e.Clock.Advance(time.Minute)
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{}, 1)
		hold.Release()
		holder := apitest.Await(t, got, "the holder's answer")
		wantStatus(t, holder, http.StatusCreated)
		if holder.JSON(t)["status"] != "authorized" {
			t.Fatalf("holder's answer = %s", holder.Body)
		}
		wantEffects(t, e.Sim, 1)
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-rc-held:autorizar-v1", "pedido-rc-held:autorizar-v1")
		wantReplay(t, holder, create(e, "k-rc-held", body))
		wantSummary(t, runOnce(t, e, nil), 0, map[string]int{}, 0)
	})

	t.Run("PastKeyRetentionNotFoundFailsThenReplayMakesAttemptTwo", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{KeyRetention: time.Minute, SearchGrace: 2 * time.Minute})
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
		p := createUnknown(t, e, "k-rc-lost", createBody("pedido-rc-lost", 2000))
		id := p["id"].(string)
		e.Clock.Advance(3 * time.Minute)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"failed": 1}, 0)
		got := getPaymentJSON(t, e, id)
		if got["status"] != "failed" || got["failure_code"] != "not_found_at_provider" {
			t.Fatalf("payment = %v, want failed with not_found_at_provider", got)
		}
		// Past the retention the reconciler searched; it never re-sent the key.
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-rc-lost:autorizar-v1")
		if n := len(opRequests(e.Sim, "search")); n != 1 {
			t.Fatalf("searches = %d, want 1", n)
		}
		wantEffects(t, e.Sim, 0)

		replay := e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/payments/" + id + "/replay",
			Key: "replay-lost", Bearer: apitest.AdminToken, Body: `{"actor":"ana@acmepay.dev","reason":"customer saw no charge"}`})
		wantStatus(t, replay, http.StatusCreated)
		rp := replay.JSON(t)
		if rp["id"] != id || rp["status"] != "authorized" || rp["attempt"] != float64(2) || rp["failure_code"] != nil {
			t.Fatalf("replayed payment = %s", replay.Body)
		}
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-rc-lost:autorizar-v1", "pedido-rc-lost:autorizar-v2")
		wantEffects(t, e.Sim, 1)

		v := adminGet(t, e, id)
		if len(v.Attempts) != 2 || v.Attempts[0].ProviderKey != "pedido-rc-lost:autorizar-v1" || v.Attempts[0].Status != "failed" ||
			v.Attempts[1].ProviderKey != "pedido-rc-lost:autorizar-v2" || v.Attempts[1].Status != "succeeded" {
			t.Fatalf("attempts = %+v", v.Attempts)
		}
		found := false
		for _, a := range v.Audit {
			if a.Action == "replay.new_attempt" && a.Actor == "ana@acmepay.dev" && a.Reason == "customer saw no charge" &&
				a.Details["replaces_provider_key"] == "pedido-rc-lost:autorizar-v1" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no audited replay with actor and reason in %+v", v.Audit)
		}
		again := e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/payments/" + id + "/replay",
			Key: "replay-lost", Bearer: apitest.AdminToken, Body: `{"actor":"ana@acmepay.dev","reason":"customer saw no charge"}`})
		if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(replay.Body) {
			t.Fatalf("replay with the same key: %d %s", again.Status, again.Body)
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("PastKeyRetentionAdoptsWhatSearchFinds", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{KeyRetention: time.Minute, SearchGrace: 2 * time.Minute})
		drop := dropAuthorize(e)
		p := createUnknown(t, e, "k-rc-found", createBody("pedido-rc-found", 2000))
		drop.Remove()
		e.Clock.Advance(2 * time.Minute)
		sent := len(opRequests(e.Sim, "authorize"))

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"authorized": 1}, 0)
		got := getPaymentJSON(t, e, p["id"].(string))
		intents := e.Sim.Intents(e.Account.StripeSecret)
		if got["status"] != "authorized" || len(intents) != 1 || got["provider_payment_id"] != intents[0].ID {
			t.Fatalf("payment = %v, intents %+v", got, intents)
		}
		if n := len(opRequests(e.Sim, "authorize")); n != sent {
			t.Fatalf("the reconciler re-sent an authorization past the key retention")
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("PastKeyRetentionIgnoresAnEarlierAttemptsIntent", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{KeyRetention: time.Minute, SearchGrace: 2 * time.Minute})
		declined := `{"order_id":"pedido-rc-prev","amount":2000,"currency":"BRL","payment_method":"pm_card_chargeDeclined","capture_method":"manual"}`
		first := create(e, "k-rc-prev", declined)
		wantStatus(t, first, http.StatusCreated)
		id := first.JSON(t)["id"].(string)
		// Attempt 2 never reaches the provider; attempt 1's declined intent
		// carries the same payment_id.
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
		if r := replay(e, id, "replay-prev"); r.Status != http.StatusCreated || r.JSON(t)["status"] != "unknown" {
			t.Fatalf("replay = %d %s, want 201 with the payment unknown", r.Status, r.Body)
		}
		e.Clock.Advance(3 * time.Minute)

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"failed": 1}, 0)
		got := getPaymentJSON(t, e, id)
		if got["status"] != "failed" || got["failure_code"] != "not_found_at_provider" || got["provider_payment_id"] != nil {
			t.Fatalf("attempt 2 resolved from attempt 1's intent: %v", got)
		}
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-rc-prev:autorizar-v1", "pedido-rc-prev:autorizar-v2")
	})

	t.Run("NotFoundWithinSearchGraceStaysUnknown", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{KeyRetention: time.Minute, SearchGrace: 10 * time.Minute})
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
		p := createUnknown(t, e, "k-rc-grace", createBody("pedido-rc-grace", 2000))
		e.Clock.Advance(2 * time.Minute)
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{}, 1)
		if got := getPaymentJSON(t, e, p["id"].(string)); got["status"] != "unknown" {
			t.Fatalf("status = %v, want unknown until the search grace has passed", got["status"])
		}
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-rc-grace:autorizar-v1")
	})

	t.Run("ThreeReconcilersResolveEachPaymentOnce", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		const n = 30
		drop := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect})
		ids := make([]string, n)
		for i := range n {
			ids[i] = createUnknown(t, e, fmt.Sprintf("k-many-%d", i), createBody(fmt.Sprintf("pedido-many-%d", i), 100+i))["id"].(string)
		}
		drop.Remove()
		wantEffects(t, e.Sim, n)

		services := []*payment.Service{e.Payments}
		for range 2 {
			_, svc, _ := e.StartInstance()
			services = append(services, svc)
		}
		sums := make([]reconcile.Summary, len(services))
		errs := make([]error, len(services))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, svc := range services {
			// One claim at a time, so the reconcilers interleave.
			r, err := reconcile.New(reconcile.Config{Payments: svc, Store: e.ReconcileStore(), Now: e.ServiceClock(), Accounts: e.Accounts, After: 0})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				sums[i], errs[i] = r.RunOnce(context.Background())
			}()
		}
		close(start)
		apitest.Wait(t, &wg, "the three reconciliation passes")
		examined, authorized := 0, 0
		for i, s := range sums {
			if errs[i] != nil {
				t.Fatalf("reconciler %d: %v", i, errs[i])
			}
			examined += s.Examined
			authorized += s.Resolved["authorized"]
			if s.StillUnknown != 0 || len(s.Resolved) > 1 {
				t.Fatalf("reconciler %d summary = %+v", i, s)
			}
		}
		if examined != n || authorized != n {
			t.Fatalf("examined %d and authorized %d over %+v, want %d each", examined, authorized, sums, n)
		}
		wantEffects(t, e.Sim, n)
		for _, id := range ids {
			v := adminGet(t, e, id)
			if v.Payment["status"] != "authorized" || v.resolutions() != 1 {
				t.Fatalf("payment %s: status %v, %d reconciler audit entries; want authorized, 1", id, v.Payment["status"], v.resolutions())
			}
		}
	})
}
