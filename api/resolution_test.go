package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// paidBehind makes a payment we hold as canceled that the provider shows
// paid in full (2000), audits it, and returns the payment, its intent and
// the open paid_at_provider_not_here discrepancy.
func paidBehind(t *testing.T, e *apitest.Env, order string) (paymentID, intentID, dscID string) {
	t.Helper()
	r := e.Create("k-"+order, apitest.CreateBody(order, 2000))
	apitest.WantStatus(t, r, http.StatusCreated)
	paymentID, intentID = r.JSON(t)["id"].(string), r.JSON(t)["provider_payment_id"].(string)
	apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + paymentID + "/cancel", Key: "c-" + order}), http.StatusOK)
	if _, err := e.Sim.PayBehind(intentID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Operations.Audit(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	for _, d := range listDiscrepancies(t, e, "?status=open&payment_id="+paymentID) {
		if d.Kind == "paid_at_provider_not_here" {
			return paymentID, intentID, d.ID
		}
	}
	t.Fatalf("no paid_at_provider_not_here discrepancy for %s", paymentID)
	return
}

func resolveDsc(e *apitest.Env, id, key, action string) *apitest.Response {
	return e.Do(resolveRequest(id, key, action))
}

func resolveRequest(id, key, action string) apitest.Request {
	return apitest.Request{Method: http.MethodPost, Path: "/admin/v1/discrepancies/" + id + "/resolve",
		Key: key, Bearer: apitest.AdminToken, Body: fmt.Sprintf(`{"actor":"ana","reason":"ticket 9","action":%q}`, action)}
}

type resolvedJSON struct {
	Status     string `json:"status"`
	Resolution *struct {
		Action   string `json:"action"`
		RefundID string `json:"refund_id"`
		Status   string `json:"status"`
		Actor    string `json:"actor"`
	} `json:"resolution"`
}

func getDsc(t *testing.T, e *apitest.Env, id string) resolvedJSON {
	t.Helper()
	r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/discrepancies/" + id, Bearer: apitest.AdminToken})
	apitest.WantStatus(t, r, http.StatusOK)
	return decodeDsc(t, r)
}

func decodeDsc(t *testing.T, r *apitest.Response) resolvedJSON {
	t.Helper()
	var d resolvedJSON
	if err := json.Unmarshal(r.Body, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// refundRows lists the payment's refunds as "status:amount".
func refundRows(t *testing.T, e *apitest.Env, paymentID string) []string {
	t.Helper()
	rows, err := e.DB.Pool.Query(context.Background(), `SELECT status, amount FROM refunds WHERE payment_id = $1 ORDER BY created_at`, paymentID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var st string
		var amount int64
		if err := rows.Scan(&st, &amount); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%d", st, amount))
	}
	return out
}

func wantMoney(t *testing.T, e *apitest.Env, id, status string, captured, refunded float64) {
	t.Helper()
	p := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id}).JSON(t)
	if p["status"] != status || p["amount_captured"] != captured || p["amount_refunded"] != refunded {
		t.Errorf("payment %s: status %v captured %v refunded %v, want %s %v %v", id, p["status"], p["amount_captured"], p["amount_refunded"], status, captured, refunded)
	}
}

func TestResolveRefund(t *testing.T) {
	t.Parallel()

	t.Run("SucceedsResolves", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		pay, _, dsc := paidBehind(t, e, "rs-ok")
		before := e.Sim.Stats().Refunds
		r := resolveDsc(e, dsc, "r1", "refund")
		apitest.WantStatus(t, r, http.StatusOK)
		d := decodeDsc(t, r)
		if d.Status != "resolved" || d.Resolution == nil || d.Resolution.Action != "refund" || d.Resolution.Status != "succeeded" || d.Resolution.Actor != "ana" {
			t.Fatalf("answer %s", r.Body)
		}
		wantMoney(t, e, pay, "captured", 2000, 2000)
		if got := refundRows(t, e, pay); len(got) != 1 || got[0] != "succeeded:2000" {
			t.Errorf("refunds %v", got)
		}
		again := resolveDsc(e, dsc, "r1", "refund")
		if again.Status != http.StatusOK || string(again.Body) != string(r.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay: %d %s", again.Status, again.Body)
		}
		if got := e.Sim.Stats().Refunds - before; got != 1 {
			t.Errorf("refunds at the provider = %d, want 1", got)
		}
		// Nothing is left to find.
		if _, err := e.Operations.Audit(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		if open := listDiscrepancies(t, e, "?status=open&payment_id="+pay); len(open) != 0 {
			t.Errorf("open after the refund: %+v", open)
		}
	})

	t.Run("ProviderRefusesStaysOpen", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		pay, pi, dsc := paidBehind(t, e, "rs-refused")
		before := e.Sim.Stats().Refunds
		// Between the resolve's lookups and its refund, a refund in the
		// dashboard leaves less than the whole: the provider refuses.
		hold := e.Sim.Inject(providersim.Fault{Op: "refund", Kind: providersim.HoldBeforeEffect, Times: 1})
		done := e.DoAsync(resolveRequest(dsc, "r1", "refund"))
		apitest.Recv(t, hold.Reached(), "the refund at the provider")
		if _, err := e.Sim.DashboardRefund(pi, 1); err != nil {
			t.Fatal(err)
		}
		hold.Release()
		r := apitest.Await(t, done, "the resolve's answer")
		if r.Status != http.StatusConflict || r.Code(t) != "provider_rejected" {
			t.Fatalf("answer %d %s, want 409 provider_rejected", r.Status, r.Body)
		}
		d := getDsc(t, e, dsc)
		if d.Status != "open" || d.Resolution == nil || d.Resolution.Status != "failed" {
			t.Errorf("discrepancy after a refusal: %+v", d)
		}
		wantMoney(t, e, pay, "canceled", 0, 0)
		if got := refundRows(t, e, pay); len(got) != 1 || got[0] != "failed:2000" {
			t.Errorf("refunds %v", got)
		}
		if got := e.Sim.Stats().Refunds - before; got != 0 {
			t.Errorf("refunds at the provider = %d, want 0", got)
		}
		// Still open, still found, and free to be resolved again: the
		// next refund returns what is left.
		if _, err := e.Operations.Audit(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		if open := listDiscrepancies(t, e, "?status=open&payment_id="+pay); len(open) == 0 {
			t.Errorf("the audit no longer sees the payment")
		}
		apitest.WantStatus(t, resolveDsc(e, dsc, "r2", "refund"), http.StatusOK)
		wantMoney(t, e, pay, "captured", 2000, 2000)
		if got := e.Sim.Stats().Refunds - before; got != 1 {
			t.Errorf("refunds at the provider = %d, want 1", got)
		}
	})

	t.Run("ProviderDoubtAnswers202ThenResolves", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		pay, _, dsc := paidBehind(t, e, "rs-doubt")
		before := e.Sim.Stats().Refunds
		fault := e.Sim.Inject(providersim.Fault{Op: "refund", Kind: providersim.Error500BeforeEffect})
		r := resolveDsc(e, dsc, "r1", "refund")
		apitest.WantStatus(t, r, http.StatusAccepted)
		d := decodeDsc(t, r)
		if d.Status != "open" || d.Resolution == nil || d.Resolution.Action != "refund" || d.Resolution.Status != "unknown" || d.Resolution.RefundID == "" {
			t.Fatalf("answer %s", r.Body)
		}
		wantMoney(t, e, pay, "canceled", 0, 0)
		// Held: no other resolve acts meanwhile.
		for i, action := range []string{"note", "refund", "adopt_provider_state"} {
			o := resolveDsc(e, dsc, fmt.Sprintf("other-%d", i), action)
			if o.Status != http.StatusConflict || o.Code(t) != "invalid_state" {
				t.Errorf("%s while the refund is in doubt: %d %s", action, o.Status, o.Body)
			}
		}
		fault.Remove()
		runOnce(t, e, nil)
		d = getDsc(t, e, dsc)
		if d.Status != "resolved" || d.Resolution.Status != "succeeded" || d.Resolution.Actor != "ana" {
			t.Errorf("after the reconciler: %+v", d)
		}
		wantMoney(t, e, pay, "captured", 2000, 2000)
		if got := refundRows(t, e, pay); len(got) != 1 || got[0] != "succeeded:2000" {
			t.Errorf("refunds %v", got)
		}
		retry := resolveDsc(e, dsc, "r1", "refund")
		if retry.Status != http.StatusOK || decodeDsc(t, retry).Status != "resolved" {
			t.Errorf("retry with the key: %d %s", retry.Status, retry.Body)
		}
		if got := e.Sim.Stats().Refunds - before; got != 1 {
			t.Errorf("refunds at the provider = %d, want 1", got)
		}
	})

	t.Run("NoteWhileTheRefundIsInFlightIsRefused", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		pay, _, dsc := paidBehind(t, e, "rs-inflight")
		before := e.Sim.Stats()
		hold := e.Sim.Inject(providersim.Fault{Op: "refund", Kind: providersim.HoldBeforeEffect, Times: 1})
		done := e.DoAsync(resolveRequest(dsc, "r-refund", "refund"))
		apitest.Recv(t, hold.Reached(), "the refund at the provider")
		mid := e.Sim.Stats()
		note := resolveDsc(e, dsc, "r-note", "note")
		if note.Status != http.StatusConflict || note.Code(t) != "invalid_state" {
			t.Errorf("note while the refund is in flight: %d %s", note.Status, note.Body)
		}
		if e.Sim.Stats().Requests != mid.Requests {
			t.Errorf("the refused note called the provider")
		}
		hold.Release()
		apitest.WantStatus(t, apitest.Await(t, done, "the refund's answer"), http.StatusOK)
		if got := e.Sim.Stats().Refunds - before.Refunds; got != 1 {
			t.Errorf("refunds at the provider = %d, want 1", got)
		}
		wantMoney(t, e, pay, "captured", 2000, 2000)
	})

	t.Run("ConcurrentNoteAndRefundRefundsOnceOrNot", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		for i := range 4 {
			pay, _, dsc := paidBehind(t, e, fmt.Sprintf("rs-race-%d", i))
			stats := e.Sim.Stats()
			before := stats.Refunds
			refCh := e.DoAsync(resolveRequest(dsc, fmt.Sprintf("race-%d-refund", i), "refund"))
			noteCh := e.DoAsync(resolveRequest(dsc, fmt.Sprintf("race-%d-note", i), "note"))
			ref := apitest.Await(t, refCh, "the refund resolve")
			note := apitest.Await(t, noteCh, "the note resolve")
			refunded := e.Sim.Stats().Refunds - before
			switch {
			case ref.Status == http.StatusOK && note.Status == http.StatusConflict:
				if refunded != 1 || note.Code(t) != "invalid_state" {
					t.Errorf("race %d: refund won, note %s, refunds at the provider %d", i, note.Body, refunded)
				}
				wantMoney(t, e, pay, "captured", 2000, 2000)
			case note.Status == http.StatusOK && ref.Status == http.StatusConflict:
				if refunded != 0 || ref.Code(t) != "invalid_state" {
					t.Errorf("race %d: note won, refund %s, refunds at the provider %d", i, ref.Body, refunded)
				}
				// The losing refund made no provider call at all, not even a
				// lookup: the note held the discrepancy first.
				if calls := e.Sim.Stats().Requests - stats.Requests; calls != 0 {
					t.Errorf("race %d: the losing refund made %d provider calls", i, calls)
				}
				wantMoney(t, e, pay, "canceled", 0, 0)
				if got := refundRows(t, e, pay); len(got) != 0 {
					t.Errorf("race %d: refunds %v after the note won", i, got)
				}
			default:
				t.Errorf("race %d: refund %d %s, note %d %s; want exactly one 200", i, ref.Status, ref.Body, note.Status, note.Body)
			}
		}
	})

	t.Run("RefundAfterANoteMakesNoProviderCall", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		pay, _, dsc := paidBehind(t, e, "rs-after-note")
		apitest.WantStatus(t, resolveDsc(e, dsc, "r-note", "note"), http.StatusOK)
		stats := e.Sim.Stats()
		r := resolveDsc(e, dsc, "r-refund", "refund")
		if r.Status != http.StatusConflict || r.Code(t) != "invalid_state" {
			t.Fatalf("refund after a note: %d %s", r.Status, r.Body)
		}
		if calls := e.Sim.Stats().Requests - stats.Requests; calls != 0 {
			t.Errorf("the refused refund made %d provider calls", calls)
		}
		wantMoney(t, e, pay, "canceled", 0, 0)
	})

	t.Run("MerchantKeyCannotCollide", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		pay, _, dsc := paidBehind(t, e, "rs-key")
		// A merchant refund keyed as the resolution's used to be.
		c := e.Create("k-other", apitest.CreateBody("rs-key-other", 1000))
		other := c.JSON(t)["id"].(string)
		apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + other + "/capture", Key: "cap"}), http.StatusOK)
		apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + other + "/refunds", Key: "discrepancy:" + dsc,
			Body: `{"amount":100}`}), http.StatusCreated)
		apitest.WantStatus(t, resolveDsc(e, dsc, "r1", "refund"), http.StatusOK)
		wantMoney(t, e, pay, "captured", 2000, 2000)
	})
}
