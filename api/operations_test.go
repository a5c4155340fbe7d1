package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// authorized creates a manual-capture payment and returns its id.
func authorized(t *testing.T, e *apitest.Env, order string, amount int) string {
	t.Helper()
	r := create(e, "k-"+order, createBody(order, amount))
	wantStatus(t, r, http.StatusCreated)
	if r.JSON(t)["status"] != "authorized" {
		t.Fatalf("payment = %s, want authorized", r.Body)
	}
	return r.JSON(t)["id"].(string)
}

// captured creates an automatic-capture payment and returns its id.
func captured(t *testing.T, e *apitest.Env, order string, amount int) string {
	t.Helper()
	r := create(e, "k-"+order, fmt.Sprintf(`{"order_id":%q,"amount":%d,"currency":"BRL","payment_method":"pm_card_visa"}`, order, amount))
	wantStatus(t, r, http.StatusCreated)
	if p := r.JSON(t); p["status"] != "captured" || p["amount_captured"] != float64(amount) {
		t.Fatalf("payment = %s, want captured in full", r.Body)
	}
	return r.JSON(t)["id"].(string)
}

func captureRequest(id, key, body string) apitest.Request {
	return apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/capture", Key: key, Body: body}
}

func cancelRequest(id, key string) apitest.Request {
	return apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/cancel", Key: key}
}

func capture(e *apitest.Env, id, key, body string) *apitest.Response {
	e.T.Helper()
	return e.Do(captureRequest(id, key, body))
}

func cancel(e *apitest.Env, id, key string) *apitest.Response {
	e.T.Helper()
	return e.Do(cancelRequest(id, key))
}

func refund(e *apitest.Env, id, key string, amount int) *apitest.Response {
	e.T.Helper()
	return e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + id + "/refunds", Key: key,
		Body: fmt.Sprintf(`{"amount":%d}`, amount)})
}

func wantReplay(t *testing.T, first, again *apitest.Response) {
	t.Helper()
	if again.Status != first.Status || again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay: %d %s (replayed %q), want the byte-identical %d %s",
			again.Status, again.Body, again.Header.Get("Idempotent-Replayed"), first.Status, first.Body)
	}
}

func TestCapture(t *testing.T) {
	t.Parallel()

	t.Run("SameKeyTwiceCapturesOnce", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		id := authorized(t, e, "pedido-cap", 2000)
		first := capture(e, id, "cap-1", "")
		wantStatus(t, first, http.StatusOK)
		if p := first.JSON(t); p["status"] != "captured" || p["amount_captured"] != float64(2000) {
			t.Fatalf("captured payment = %s", first.Body)
		}
		wantReplay(t, first, capture(e, id, "cap-1", ""))
		if st := e.Sim.Stats(); st.Captures != 1 {
			t.Fatalf("captures at the provider = %d, want 1", st.Captures)
		}
		wantKeys(t, opRequests(e.Sim, "capture"), "pedido-cap:capturar-v1")
		// Another key on a captured payment is refused before the provider.
		wantProblem(t, capture(e, id, "cap-2", ""), http.StatusConflict, "invalid_state")
		wantKeys(t, opRequests(e.Sim, "capture"), "pedido-cap:capturar-v1")
	})

	t.Run("PartialAmount", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		id := authorized(t, e, "pedido-cap-part", 2000)
		r := capture(e, id, "cap-part", `{"amount":1500}`)
		wantStatus(t, r, http.StatusOK)
		if p := r.JSON(t); p["status"] != "captured" || p["amount_captured"] != float64(1500) {
			t.Fatalf("partially captured payment = %s", r.Body)
		}
		// A different amount under the same key is another intent.
		wantProblem(t, capture(e, id, "cap-part", `{"amount":1000}`), http.StatusUnprocessableEntity, "idempotency_key_reused")
	})

	for _, c := range []struct{ name, held, other string }{
		{"CancelLosesToCaptureInFlight", "capture", "cancel"},
		{"CaptureLosesToCancelInFlight", "cancel", "capture"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := apitest.New(t, apitest.Options{})
			id := authorized(t, e, "pedido-race", 2000)
			req := map[string]func(key string) apitest.Request{
				"capture": func(key string) apitest.Request { return captureRequest(id, key, "") },
				"cancel":  func(key string) apitest.Request { return cancelRequest(id, key) },
			}
			hold := e.Sim.Inject(providersim.Fault{Op: c.held, Kind: providersim.HoldBeforeEffect, Times: 1})
			done := e.DoAsync(req[c.held]("k-held"))
			apitest.Recv(t, hold.Reached(), "the held "+c.held+" to reach the provider")
			wantProblem(t, e.Do(req[c.other]("k-other")), http.StatusConflict, "invalid_state")
			hold.Release()
			won := apitest.Await(t, done, "the held "+c.held+"'s answer")
			wantStatus(t, won, http.StatusOK)
			want := map[string]string{"capture": "captured", "cancel": "canceled"}[c.held]
			if won.JSON(t)["status"] != want {
				t.Fatalf("winner = %s, want %s", won.Body, want)
			}
			if n := len(opRequests(e.Sim, c.other)); n != 0 {
				t.Fatalf("the loser reached the provider %d times", n)
			}
			if st := e.Sim.Stats(); st.Captures+st.Cancels != 1 {
				t.Fatalf("captures %d + cancels %d at the provider, want 1", st.Captures, st.Cancels)
			}
			// The loser reserved nothing: its key still answers from the
			// current state, refused again.
			wantProblem(t, e.Do(req[c.other]("k-other")), http.StatusConflict, "invalid_state")
		})
	}

	t.Run("UnknownCaptureResolvedByReconciler", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		id := authorized(t, e, "pedido-cap-unk", 2000)
		drop := e.Sim.Inject(providersim.Fault{Op: "capture", Kind: providersim.DropAfterEffect, Times: 2})
		first := capture(e, id, "cap-unk", "")
		wantStatus(t, first, http.StatusAccepted)
		drop.Remove()
		// While its outcome is unknown, nothing else may capture or cancel.
		wantProblem(t, cancel(e, id, "cancel-unk"), http.StatusConflict, "invalid_state")
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"captured": 1}, 0)
		again := capture(e, id, "cap-unk", "")
		wantStatus(t, again, http.StatusOK)
		if again.JSON(t)["status"] != "captured" {
			t.Fatalf("after reconciliation = %s", again.Body)
		}
		if st := e.Sim.Stats(); st.Captures != 1 || st.Cancels != 0 {
			t.Fatalf("provider stats = %+v, want one capture", st)
		}
		for _, k := range opRequests(e.Sim, "capture") {
			if k != "pedido-cap-unk:capturar-v1" {
				t.Fatalf("a capture carried %q", k)
			}
		}
	})
}

func TestCancel(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	id := authorized(t, e, "pedido-cancel", 2000)
	r := cancel(e, id, "cancel-1")
	wantStatus(t, r, http.StatusOK)
	if r.JSON(t)["status"] != "canceled" {
		t.Fatalf("canceled payment = %s", r.Body)
	}
	wantReplay(t, r, cancel(e, id, "cancel-1"))
	wantKeys(t, opRequests(e.Sim, "cancel"), "pedido-cancel:cancelar-v1")
	wantProblem(t, capture(e, id, "cap-after-cancel", ""), http.StatusConflict, "invalid_state")
	wantProblem(t, cancel(e, id, "cancel-2"), http.StatusConflict, "invalid_state")
	if st := e.Sim.Stats(); st.Cancels != 1 || st.Captures != 0 {
		t.Fatalf("provider stats = %+v, want one cancel and no capture", st)
	}
	// A canceled order takes a new payment.
	next := create(e, "k-pedido-cancel-2", createBody("pedido-cancel", 2000))
	wantStatus(t, next, http.StatusCreated)
	if p := next.JSON(t); p["attempt"] != float64(2) || p["id"] == id {
		t.Fatalf("next payment = %s", next.Body)
	}
}

func TestRefund(t *testing.T) {
	t.Parallel()

	t.Run("PartialThenRemainderThenOverRefund", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		id := captured(t, e, "pedido-ref", 2000)

		first := refund(e, id, "ref-1", 500)
		wantStatus(t, first, http.StatusCreated)
		if rf := first.JSON(t); rf["status"] != "succeeded" || rf["amount"] != float64(500) || rf["payment_id"] != id || rf["provider_refund_id"] == nil {
			t.Fatalf("refund = %s", first.Body)
		}
		if p := getPaymentJSON(t, e, id); p["status"] != "captured" || p["amount_refunded"] != float64(500) {
			t.Fatalf("payment after a partial refund = %v", p)
		}
		wantKeys(t, opRequests(e.Sim, "refund"), "pedido-ref:estornar-v1")

		// More than what is left is refused before the provider.
		wantProblem(t, refund(e, id, "ref-too-much", 1501), http.StatusConflict, "refund_exceeds_captured")
		wantKeys(t, opRequests(e.Sim, "refund"), "pedido-ref:estornar-v1")

		second := refund(e, id, "ref-2", 1500)
		wantStatus(t, second, http.StatusCreated)
		if p := getPaymentJSON(t, e, id); p["status"] != "captured" || p["amount_refunded"] != float64(2000) {
			t.Fatalf("payment after the full remainder = %v", p)
		}
		wantKeys(t, opRequests(e.Sim, "refund"), "pedido-ref:estornar-v1", "pedido-ref:estornar-v2")

		wantProblem(t, refund(e, id, "ref-3", 1), http.StatusConflict, "refund_exceeds_captured")
		wantKeys(t, opRequests(e.Sim, "refund"), "pedido-ref:estornar-v1", "pedido-ref:estornar-v2")

		wantReplay(t, first, refund(e, id, "ref-1", 500))
		wantReplay(t, second, refund(e, id, "ref-2", 1500))
		if st := e.Sim.Stats(); st.Refunds != 2 {
			t.Fatalf("refunds at the provider = %d, want 2", st.Refunds)
		}
	})

	t.Run("UncapturedPaymentIsInvalidState", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		id := authorized(t, e, "pedido-ref-auth", 2000)
		wantProblem(t, refund(e, id, "ref-auth", 100), http.StatusConflict, "invalid_state")
		if n := len(opRequests(e.Sim, "refund")); n != 0 {
			t.Fatalf("%d refunds reached the provider", n)
		}
	})

	t.Run("UnknownRefundResolvedByReconciler", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		id := captured(t, e, "pedido-ref-unk", 2000)
		drop := e.Sim.Inject(providersim.Fault{Op: "refund", Kind: providersim.DropAfterEffect, Times: 2})
		first := refund(e, id, "ref-unk", 1500)
		wantStatus(t, first, http.StatusAccepted)
		drop.Remove()
		if rf := first.JSON(t); rf["status"] != "unknown" || first.Header.Get("Retry-After") == "" {
			t.Fatalf("unknown refund = %s", first.Body)
		}
		// The refund in flight still holds its amount.
		wantProblem(t, refund(e, id, "ref-more", 600), http.StatusConflict, "refund_exceeds_captured")
		if p := getPaymentJSON(t, e, id); p["amount_refunded"] != float64(0) {
			t.Fatalf("amount_refunded = %v before the outcome is known", p["amount_refunded"])
		}

		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"refunded": 1}, 0)
		if p := getPaymentJSON(t, e, id); p["status"] != "captured" || p["amount_refunded"] != float64(1500) {
			t.Fatalf("payment after reconciliation = %v", p)
		}
		again := refund(e, id, "ref-unk", 1500)
		wantStatus(t, again, http.StatusCreated)
		if rf := again.JSON(t); rf["status"] != "succeeded" || rf["id"] != first.JSON(t)["id"] || rf["provider_refund_id"] == nil {
			t.Fatalf("refund after reconciliation = %s", again.Body)
		}
		if st := e.Sim.Stats(); st.Refunds != 1 {
			t.Fatalf("refunds at the provider = %d, want 1", st.Refunds)
		}
		for _, k := range opRequests(e.Sim, "refund") {
			if k != "pedido-ref-unk:estornar-v1" {
				t.Fatalf("a refund carried %q", k)
			}
		}
	})
}
