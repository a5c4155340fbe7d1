package api_test

import (
	"bytes"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

const replayBody = `{"actor":"ops@acmepay.dev","reason":"customer reported no confirmation"}`

func replayRequest(id, key string) apitest.Request {
	return apitest.Request{Method: http.MethodPost, Path: "/admin/v1/payments/" + id + "/replay",
		Key: key, Bearer: apitest.AdminToken, Body: replayBody}
}

func replay(e *apitest.Env, id, key string) *apitest.Response {
	e.T.Helper()
	return e.Do(replayRequest(id, key))
}

func wantProblem(t *testing.T, r *apitest.Response, status int, code string) {
	t.Helper()
	if r.Status != status || r.Code(t) != code {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

// failedNotFound makes a payment that reconciliation proved never reached the
// provider: failed with not_found_at_provider.
func failedNotFound(t *testing.T, e *apitest.Env, order string) string {
	t.Helper()
	e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
	id := createUnknown(t, e, "k-"+order, createBody(order, 2000))["id"].(string)
	// Past the key's re-send window, and past the search grace.
	e.Clock.Advance(max(3*time.Minute, e.Opts.KeyRetention+time.Minute))
	wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"failed": 1}, 0)
	return id
}

func TestAdminReplay(t *testing.T) {
	t.Parallel()

	t.Run("RefusesWhileProviderStillFailsWithinRetention", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect})
		id := createUnknown(t, e, "k-ru", createBody("pedido-ru", 2000))["id"].(string)
		wantProblem(t, replay(e, id, "replay-ru"), http.StatusConflict, "outcome_unknown")
		wantEffects(t, e.Sim, 0)
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-ru:autorizar-v1", "pedido-ru:autorizar-v1")
		v := adminGet(t, e, id)
		if len(v.Attempts) != 1 || v.Payment["status"] != "unknown" {
			t.Fatalf("after a refused replay: status %v, attempts %+v", v.Payment["status"], v.Attempts)
		}
	})

	t.Run("RefusesWhileSearchFailsPastRetention", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{KeyRetention: time.Minute, SearchGrace: 2 * time.Minute})
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
		e.Sim.Inject(providersim.Fault{Op: "search", Kind: providersim.Error500BeforeEffect})
		id := createUnknown(t, e, "k-rs", createBody("pedido-rs", 2000))["id"].(string)
		e.Clock.Advance(3 * time.Minute)
		wantProblem(t, replay(e, id, "replay-rs"), http.StatusConflict, "outcome_unknown")
		wantEffects(t, e.Sim, 0)
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-rs:autorizar-v1")
		if n := len(adminGet(t, e, id).Attempts); n != 1 {
			t.Fatalf("attempts = %d, want 1", n)
		}
	})

	t.Run("AdoptsFoundSuccessWithoutNewAttempt", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		drop := dropAuthorize(e)
		id := createUnknown(t, e, "k-ad", createBody("pedido-ad", 2000))["id"].(string)
		drop.Remove()
		r := replay(e, id, "replay-ad")
		wantStatus(t, r, http.StatusOK)
		if p := r.JSON(t); p["status"] != "authorized" || p["attempt"] != float64(1) {
			t.Fatalf("adopted payment = %s", r.Body)
		}
		wantEffects(t, e.Sim, 1)
		for _, k := range opRequests(e.Sim, "authorize") {
			if k != "pedido-ad:autorizar-v1" {
				t.Fatalf("an authorization carried %q, want only pedido-ad:autorizar-v1", k)
			}
		}
		v := adminGet(t, e, id)
		if len(v.Attempts) != 1 {
			t.Fatalf("attempts = %+v, want the one adopted attempt", v.Attempts)
		}
		adopted := false
		for _, a := range v.Audit {
			if a.Action == "replay.adopted" && a.Actor == "ops@acmepay.dev" && a.Reason == "customer reported no confirmation" {
				adopted = true
			}
		}
		if !adopted {
			t.Fatalf("no audited adoption in %+v", v.Audit)
		}
		again := replay(e, id, "replay-ad")
		if again.Status != http.StatusOK || again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, r.Body) {
			t.Fatalf("same key again: %d %s", again.Status, again.Body)
		}
	})

	t.Run("AuthorizedPaymentIsInvalidState", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		c := create(e, "k-ok", createBody("pedido-ok", 2000))
		wantStatus(t, c, http.StatusCreated)
		wantProblem(t, replay(e, c.JSON(t)["id"].(string), "replay-ok"), http.StatusConflict, "invalid_state")
		wantEffects(t, e.Sim, 1)
		// Refused before anything was reserved: the key is still free.
		wantProblem(t, replay(e, c.JSON(t)["id"].(string), "replay-ok"), http.StatusConflict, "invalid_state")
	})

	t.Run("UnknownNewAttemptAnswers201ThenRecovers", func(t *testing.T) {
		t.Parallel()
		// Long enough a retention that attempt 2 is re-sent inside its window.
		e := apitest.New(t, apitest.Options{KeyRetention: 10 * time.Minute, SearchGrace: 2 * time.Minute})
		id := failedNotFound(t, e, "pedido-r202")
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
		first := replay(e, id, "replay-202")
		wantStatus(t, first, http.StatusCreated)
		if p := first.JSON(t); p["status"] != "unknown" || p["attempt"] != float64(2) {
			t.Fatalf("replay answer = %s", first.Body)
		}
		second := replay(e, id, "replay-202")
		wantStatus(t, second, http.StatusCreated)
		if p := second.JSON(t); p["status"] != "authorized" || p["attempt"] != float64(2) {
			t.Fatalf("recovered replay = %s", second.Body)
		}
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-r202:autorizar-v1", "pedido-r202:autorizar-v2", "pedido-r202:autorizar-v2")
		wantEffects(t, e.Sim, 1)
		if n := len(adminGet(t, e, id).Attempts); n != 2 {
			t.Fatalf("attempts = %d, want 2", n)
		}
	})

	t.Run("ConcurrentReplaysWithOneKeyMakeOneAttempt", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{KeyRetention: time.Minute, SearchGrace: 2 * time.Minute})
		id := failedNotFound(t, e, "pedido-rc")
		second, _, _ := e.StartInstance()
		hold := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldBeforeEffect, Times: 1})
		const n = 6
		results := make(chan apitest.Outcome, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			req := replayRequest(id, "replay-race")
			if i%2 == 1 {
				req.BaseURL = second
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := e.TryDo(req)
				results <- apitest.Outcome{Response: r, Err: err}
			}()
		}
		close(start)
		apitest.Recv(t, hold.Reached(), "one replay's authorization to reach the provider")
		var got []*apitest.Response
		for len(got) < n-1 {
			got = append(got, apitest.Await(t, results, "the answers to the replays not held"))
		}
		hold.Release()
		got = append(got, apitest.Await(t, results, "the held replay's answer"))
		apitest.Wait(t, &wg, "the replays")
		created := 0
		for _, r := range got {
			switch {
			case r.Status == http.StatusCreated:
				created++
			case r.Status == http.StatusConflict && r.Code(t) == "idempotency_key_in_use":
			default:
				t.Fatalf("unexpected answer %d %s", r.Status, r.Body)
			}
		}
		if created != 1 {
			t.Fatalf("%d replays answered 201, want 1", created)
		}
		wantEffects(t, e.Sim, 1)
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-rc:autorizar-v1", "pedido-rc:autorizar-v2")
		if v := adminGet(t, e, id); len(v.Attempts) != 2 || v.Payment["status"] != "authorized" {
			t.Fatalf("status %v, attempts %+v; want authorized with 2 attempts", v.Payment["status"], v.Attempts)
		}
	})

	t.Run("ConcurrentReplaysWithTwoKeysMakeOneAttempt", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{KeyRetention: time.Minute, SearchGrace: 2 * time.Minute})
		id := failedNotFound(t, e, "pedido-r2k")
		hold := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldBeforeEffect, Times: 1})
		first := e.DoAsync(replayRequest(id, "replay-one"))
		apitest.Recv(t, hold.Reached(), "the first replay's authorization to reach the provider")
		// The first replay's attempt is in flight: its outcome is not known.
		wantProblem(t, replay(e, id, "replay-two"), http.StatusConflict, "outcome_unknown")
		hold.Release()
		wantStatus(t, apitest.Await(t, first, "the first replay's answer"), http.StatusCreated)
		// Now the payment is authorized: a later replay is refused.
		wantProblem(t, replay(e, id, "replay-two"), http.StatusConflict, "invalid_state")
		wantEffects(t, e.Sim, 1)
		wantKeys(t, opRequests(e.Sim, "authorize"), "pedido-r2k:autorizar-v1", "pedido-r2k:autorizar-v2")
	})
}

func TestAdmin(t *testing.T) {
	t.Parallel()

	t.Run("ListsStuckPaymentsOfAnyAccount", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		_, otherKey := e.CreateAccount("Loja Dois", "sk_test_other_"+apitest.SecretSuffix(t))
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
		stuck := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-stuck", Bearer: otherKey,
			Body: createBody("pedido-stuck", 2000)})
		wantStatus(t, stuck, http.StatusAccepted)
		stuckID := stuck.JSON(t)["id"].(string)
		wantStatus(t, create(e, "k-fine", createBody("pedido-fine", 2000)), http.StatusCreated)

		r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments?status=unknown,processing&older_than=0s", Bearer: apitest.AdminToken})
		wantStatus(t, r, http.StatusOK)
		data := r.JSON(t)["data"].([]any)
		if len(data) != 1 || data[0].(map[string]any)["id"] != stuckID || data[0].(map[string]any)["status"] != "unknown" {
			t.Fatalf("stuck list = %s, want only %s", r.Body, stuckID)
		}
		// Younger than older_than: not listed yet.
		r = e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments?status=unknown&older_than=5m", Bearer: apitest.AdminToken})
		wantStatus(t, r, http.StatusOK)
		if data := r.JSON(t)["data"].([]any); len(data) != 0 {
			t.Fatalf("older_than=5m listed %s", r.Body)
		}
		// An account's API key is not the admin token.
		wantProblem(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments", Bearer: otherKey}), http.StatusUnauthorized, "unauthorized")
	})

	t.Run("WrongOrMissingTokenIs401", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		for _, bearer := range []string{"wrong-token", "-"} {
			for _, req := range []apitest.Request{
				{Method: http.MethodGet, Path: "/admin/v1/payments?status=unknown&older_than=0s"},
				{Method: http.MethodGet, Path: "/admin/v1/payments/pay_x"},
				{Method: http.MethodPost, Path: "/admin/v1/payments/pay_x/replay", Key: "k", Body: replayBody},
				{Method: http.MethodPost, Path: "/admin/v1/payments/pay_x/reconcile", Body: replayBody},
			} {
				req.Bearer = bearer
				wantProblem(t, e.Do(req), http.StatusUnauthorized, "unauthorized")
			}
		}
	})

	t.Run("ReconcileNowResolvesWithActorAndReason", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		drop := dropAuthorize(e)
		id := createUnknown(t, e, "k-now", createBody("pedido-now", 2000))["id"].(string)
		drop.Remove()
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/payments/" + id + "/reconcile", Bearer: apitest.AdminToken, Body: replayBody})
		wantStatus(t, r, http.StatusOK)
		if r.JSON(t)["status"] != "authorized" {
			t.Fatalf("reconciled payment = %s", r.Body)
		}
		wantEffects(t, e.Sim, 1)
		found := false
		for _, a := range adminGet(t, e, id).Audit {
			if a.Action == "reconcile" && a.Actor == "ops@acmepay.dev" && a.Reason == "customer reported no confirmation" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no audited reconciliation with actor and reason")
		}
	})
}
