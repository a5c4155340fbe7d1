package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

var (
	createBody  = apitest.CreateBody
	create      = (*apitest.Env).Create
	wantStatus  = apitest.WantStatus
	wantEffects = apitest.WantAuthorizations
)

// authorizeKeys lists the provider keys of every authorize request the
// simulator received.
func authorizeKeys(sim *providersim.Server) []string {
	var keys []string
	for _, r := range sim.Requests() {
		if r.Op == "authorize" {
			keys = append(keys, r.IdempotencyKey)
		}
	}
	return keys
}

func TestCreate(t *testing.T) {
	t.Parallel()

	t.Run("ReplaysSameKeySameBody", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		first := create(e, "k-1", createBody("pedido-842", 2000))
		wantStatus(t, first, http.StatusCreated)
		if got := first.JSON(t)["status"]; got != "authorized" {
			t.Fatalf("status field = %v, want authorized", got)
		}
		if first.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first answer marked as replayed")
		}
		second := create(e, "k-1", createBody("pedido-842", 2000))
		wantStatus(t, second, http.StatusCreated)
		if !bytes.Equal(first.Body, second.Body) {
			t.Fatalf("replay differs:\n%s\n%s", first.Body, second.Body)
		}
		if second.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("Idempotent-Replayed = %q, want true", second.Header.Get("Idempotent-Replayed"))
		}
		wantEffects(t, e.Sim, 1)
		if keys := authorizeKeys(e.Sim); len(keys) != 1 || keys[0] != "pedido-842:autorizar-v1" {
			t.Fatalf("provider keys = %v, want [pedido-842:autorizar-v1]", keys)
		}
	})

	t.Run("QuotedKeyIsTheSameKey", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		first := create(e, "abc", createBody("o-q", 100))
		wantStatus(t, first, http.StatusCreated)
		second := create(e, `"abc"`, createBody("o-q", 100))
		if second.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(first.Body, second.Body) {
			t.Fatalf("quoted key was not replayed: %d %s", second.Status, second.Body)
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("ConcurrentSameKeyOnTwoInstances", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		second, _, _ := e.StartInstance()
		hold := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldAfterEffect, Times: 1})
		const n = 50
		results := make(chan apitest.Outcome, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			req := apitest.CreateRequest("same-key", createBody("pedido-50", 5000))
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
		apitest.Recv(t, hold.Reached(), "the holder's authorization to reach the provider")
		// Every request but the holder's is answered while it is held.
		var got []*apitest.Response
		for len(got) < n-1 {
			got = append(got, apitest.Await(t, results, "the answers to the requests not held"))
		}
		hold.Release()
		got = append(got, apitest.Await(t, results, "the holder's answer"))
		apitest.Wait(t, &wg, "the concurrent creates")
		var created []*apitest.Response
		for _, r := range got {
			switch {
			case r.Status == http.StatusCreated:
				created = append(created, r)
			case r.Status == http.StatusConflict && r.Code(t) == "idempotency_key_in_use":
				if r.Header.Get("Retry-After") != "1" {
					t.Fatalf("409 without Retry-After: 1")
				}
			default:
				t.Fatalf("unexpected answer %d %s", r.Status, r.Body)
			}
		}
		if len(created) != 1 {
			t.Fatalf("%d answers were 201, want exactly 1 (the holder)", len(created))
		}
		wantEffects(t, e.Sim, 1)
		replay := create(e, "same-key", createBody("pedido-50", 5000))
		if !bytes.Equal(replay.Body, created[0].Body) {
			t.Fatalf("replay after the race differs from the holder's answer")
		}
	})

	t.Run("RejectsKeyReuseWithDifferentRequest", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		wantStatus(t, create(e, "k-reuse", createBody("pedido-1", 2000)), http.StatusCreated)
		for name, body := range map[string]string{
			"amount":         createBody("pedido-1", 2001),
			"currency":       `{"order_id":"pedido-1","amount":2000,"currency":"USD","payment_method":"pm_card_visa","capture_method":"manual"}`,
			"order":          createBody("pedido-2", 2000),
			"payment_method": `{"order_id":"pedido-1","amount":2000,"currency":"BRL","payment_method":"pm_card_chargeDeclined","capture_method":"manual"}`,
			"capture_method": `{"order_id":"pedido-1","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`,
			"metadata":       `{"order_id":"pedido-1","amount":2000,"currency":"BRL","payment_method":"pm_card_visa","capture_method":"manual","metadata":{"a":"b"}}`,
		} {
			r := create(e, "k-reuse", body)
			if r.Status != http.StatusUnprocessableEntity || r.Code(t) != "idempotency_key_reused" {
				t.Fatalf("%s changed: got %d %s, want 422 idempotency_key_reused", name, r.Status, r.Body)
			}
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("ReplaysEquivalentEncodings", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		first := create(e, "k-enc", createBody("pedido-enc", 2000))
		wantStatus(t, first, http.StatusCreated)
		for name, body := range map[string]string{
			"reordered":      `{"capture_method":"manual","payment_method":"pm_card_visa","currency":"BRL","amount":2000,"order_id":"pedido-enc"}`,
			"whitespace":     "{\n  \"order_id\" : \"pedido-enc\",\t\"amount\": 2000, \"currency\":\"BRL\",\n \"payment_method\":\"pm_card_visa\", \"capture_method\":\"manual\" }\n",
			"lower currency": `{"order_id":"pedido-enc","amount":2000,"currency":"brl","payment_method":"pm_card_visa","capture_method":"manual"}`,
			"escaped":        `{"order_id":"pedido\u002denc","amount":2e3,"currency":"BRL","payment_method":"pm_card_visa","capture_method":"manual","metadata":{}}`,
		} {
			r := create(e, "k-enc", body)
			if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Body, first.Body) {
				t.Fatalf("%s: got %d %s, want the byte-identical replay", name, r.Status, r.Body)
			}
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("DefaultsCountInTheFingerprint", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		wantStatus(t, create(e, "k-def", `{"order_id":"o-def","amount":10,"currency":"BRL","payment_method":"pm_card_visa"}`), http.StatusCreated)
		r := create(e, "k-def", `{"order_id":"o-def","amount":10,"currency":"BRL","payment_method":"pm_card_visa","capture_method":"automatic","metadata":{}}`)
		if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("explicit defaults: got %d %s, want a replay", r.Status, r.Body)
		}
		if got := r.JSON(t)["status"]; got != "captured" {
			t.Fatalf("automatic capture status = %v, want captured", got)
		}
	})

	t.Run("LostResponseIsUnknownThenRecoveredBySameKey", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		// Two drops: Go's transport silently re-sends a POST carrying an
		// Idempotency-Key once on a reused connection.
		drop := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
		first := create(e, "k-lost", createBody("pedido-lost", 2000))
		wantStatus(t, first, http.StatusAccepted)
		if got := first.JSON(t)["status"]; got != "unknown" {
			t.Fatalf("status = %v, want unknown", got)
		}
		if first.Header.Get("Retry-After") == "" {
			t.Fatalf("202 without Retry-After")
		}
		drop.Remove()
		wantEffects(t, e.Sim, 1)
		second := create(e, "k-lost", createBody("pedido-lost", 2000))
		wantStatus(t, second, http.StatusCreated)
		p := second.JSON(t)
		if p["status"] != "authorized" || p["id"] != first.JSON(t)["id"] {
			t.Fatalf("recovered payment = %s", second.Body)
		}
		intents := e.Sim.Intents(e.Account.StripeSecret)
		if len(intents) != 1 || p["provider_payment_id"] != intents[0].ID {
			t.Fatalf("provider_payment_id %v does not match the one intent %+v", p["provider_payment_id"], intents)
		}
		wantEffects(t, e.Sim, 1)
		for _, k := range authorizeKeys(e.Sim) {
			if k != "pedido-lost:autorizar-v1" {
				t.Fatalf("provider key %q, want every request to carry pedido-lost:autorizar-v1", k)
			}
		}
		third := create(e, "k-lost", createBody("pedido-lost", 2000))
		if third.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(third.Body, second.Body) {
			t.Fatalf("the recovered answer is not replayed")
		}
	})

	t.Run("TimeoutAfterRemoteSuccess", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{ProviderTimeout: 200 * time.Millisecond, Lease: 5 * time.Second})
		slow := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DelayAfterEffect, Delay: 2 * time.Second, Times: 1})
		first := create(e, "k-slow", createBody("pedido-slow", 2000))
		wantStatus(t, first, http.StatusAccepted)
		if slow.Hits() != 1 {
			t.Fatalf("the delay fault was not hit")
		}
		wantEffects(t, e.Sim, 1)
		second := create(e, "k-slow", createBody("pedido-slow", 2000))
		wantStatus(t, second, http.StatusCreated)
		if got := second.JSON(t)["status"]; got != "authorized" {
			t.Fatalf("status = %v, want authorized", got)
		}
		wantEffects(t, e.Sim, 1)
	})

	t.Run("ProviderErrorBeforeEffectIsUnknownThenResent", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.Error500BeforeEffect, Times: 1})
		wantStatus(t, create(e, "k-500", createBody("pedido-500", 2000)), http.StatusAccepted)
		wantEffects(t, e.Sim, 0)
		r := create(e, "k-500", createBody("pedido-500", 2000))
		wantStatus(t, r, http.StatusCreated)
		wantEffects(t, e.Sim, 1)
		if keys := authorizeKeys(e.Sim); len(keys) != 2 || keys[0] != keys[1] {
			t.Fatalf("provider keys = %v, want the same key twice", keys)
		}
	})

	t.Run("DeclineThenNewKeyIsAttemptTwo", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		declined := `{"order_id":"pedido-d","amount":2000,"currency":"BRL","payment_method":"pm_card_chargeDeclined","capture_method":"manual"}`
		first := create(e, "k-d1", declined)
		wantStatus(t, first, http.StatusCreated)
		p1 := first.JSON(t)
		if p1["status"] != "declined" || p1["failure_code"] == nil {
			t.Fatalf("declined payment = %s", first.Body)
		}
		again := create(e, "k-d1", declined)
		if again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("decline not replayed")
		}
		second := create(e, "k-d2", createBody("pedido-d", 2000))
		wantStatus(t, second, http.StatusCreated)
		p2 := second.JSON(t)
		if p2["status"] != "authorized" || p2["attempt"] != float64(2) || p2["id"] == p1["id"] {
			t.Fatalf("second payment = %s", second.Body)
		}
		keys := authorizeKeys(e.Sim)
		if len(keys) != 2 || keys[0] != "pedido-d:autorizar-v1" || keys[1] != "pedido-d:autorizar-v2" {
			t.Fatalf("provider keys = %v", keys)
		}
		live := create(e, "k-d3", createBody("pedido-d", 2000))
		if live.Status != http.StatusConflict || live.Code(t) != "order_has_active_payment" || live.JSON(t)["payment_id"] != p2["id"] {
			t.Fatalf("third key on a live order: %d %s", live.Status, live.Body)
		}
		// The 409 reserved nothing: the key is free for another order.
		wantStatus(t, create(e, "k-d3", createBody("pedido-other", 2000)), http.StatusCreated)
		list := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments?order_id=pedido-d"})
		wantStatus(t, list, http.StatusOK)
		data := list.JSON(t)["data"].([]any)
		if len(data) != 2 || data[0].(map[string]any)["id"] != p1["id"] || data[1].(map[string]any)["id"] != p2["id"] {
			t.Fatalf("order list = %s", list.Body)
		}
		if st := e.Sim.Stats(); st.Declines != 1 || st.Authorizations != 2 {
			t.Fatalf("provider stats = %+v, want 1 decline and 2 authorizations (one per order)", st)
		}
	})

	t.Run("NewKeyPerRetryCannotChargeTwice", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		const n = 10
		answers := make(chan apitest.Outcome, n)
		for i := range n {
			go func() {
				r, err := e.TryDo(apitest.CreateRequest(fmt.Sprintf("buggy-%d", i), createBody("pedido-buggy", 700)))
				answers <- apitest.Outcome{Response: r, Err: err}
			}()
		}
		var got []*apitest.Response
		for range n {
			got = append(got, apitest.Await(t, answers, "the creates with a new key each"))
		}
		created := 0
		for _, r := range got {
			switch r.Status {
			case http.StatusCreated:
				created++
			case http.StatusConflict:
			default:
				t.Fatalf("unexpected status %d", r.Status)
			}
		}
		if created != 1 {
			t.Fatalf("%d creates succeeded for one order, want 1", created)
		}
		wantEffects(t, e.Sim, 1)
	})
}

func TestGetPayment(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	created := create(e, "k-get", createBody("pedido-get", 1234))
	wantStatus(t, created, http.StatusCreated)
	id := created.JSON(t)["id"].(string)
	got := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id})
	wantStatus(t, got, http.StatusOK)
	if strings.TrimSpace(string(got.Body)) != strings.TrimSpace(string(created.Body)) {
		t.Fatalf("GET differs from the create answer:\n%s\n%s", got.Body, created.Body)
	}
	missing := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/pay_nope"})
	if missing.Status != http.StatusNotFound || missing.Code(t) != "not_found" {
		t.Fatalf("missing payment: %d %s", missing.Status, missing.Body)
	}
}
