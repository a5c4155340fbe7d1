package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// planted holds one payment per discrepancy kind, each made by the
// simulator behind the service's back.
type planted struct {
	refunded, disputed, paidBehind, amount string // payment ids
}

func plantDiscrepancies(t *testing.T, e *apitest.Env) planted {
	t.Helper()
	captured := func(order string) (string, string) {
		r := e.Create("k-"+order, fmt.Sprintf(`{"order_id":%q,"amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`, order))
		apitest.WantStatus(t, r, http.StatusCreated)
		p := r.JSON(t)
		return p["id"].(string), p["provider_payment_id"].(string)
	}
	var pl planted
	var pi string
	pl.refunded, pi = captured("dsc-refund")
	if _, err := e.Sim.DashboardRefund(pi, 500); err != nil {
		t.Fatal(err)
	}
	pl.disputed, pi = captured("dsc-dispute")
	if _, err := e.Sim.OpenDispute(pi, 0, "fraudulent"); err != nil {
		t.Fatal(err)
	}
	pl.amount, pi = captured("dsc-amount")
	if _, err := e.Sim.SetAmountReceived(pi, 1500); err != nil {
		t.Fatal(err)
	}
	r := e.Create("k-dsc-behind", apitest.CreateBody("dsc-behind", 2000))
	apitest.WantStatus(t, r, http.StatusCreated)
	pl.paidBehind, pi = r.JSON(t)["id"].(string), r.JSON(t)["provider_payment_id"].(string)
	apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + pl.paidBehind + "/cancel", Key: "k-cancel"}), http.StatusOK)
	if _, err := e.Sim.PayBehind(pi); err != nil {
		t.Fatal(err)
	}
	return pl
}

type discrepancyJSON struct {
	ID            string         `json:"id"`
	PaymentID     string         `json:"payment_id"`
	Kind          string         `json:"kind"`
	Status        string         `json:"status"`
	Ours          map[string]any `json:"ours"`
	Theirs        map[string]any `json:"theirs"`
	FirstSeenAt   string         `json:"first_seen_at"`
	LastCheckedAt string         `json:"last_checked_at"`
}

func listDiscrepancies(t *testing.T, e *apitest.Env, query string) []discrepancyJSON {
	t.Helper()
	r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/discrepancies" + query, Bearer: apitest.AdminToken})
	apitest.WantStatus(t, r, http.StatusOK)
	var page struct {
		Data []discrepancyJSON `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	return page.Data
}

func byPayment(ds []discrepancyJSON) map[string][]string {
	out := map[string][]string{}
	for _, d := range ds {
		out[d.PaymentID] = append(out[d.PaymentID], d.Kind)
	}
	return out
}

func TestAudit(t *testing.T) {
	t.Parallel()

	t.Run("FindsEachPlantedKindOnceAndChangesNothing", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		pl := plantDiscrepancies(t, e)
		ids := []string{pl.refunded, pl.disputed, pl.amount, pl.paidBehind}
		before := map[string]string{}
		for _, id := range ids {
			before[id] = string(e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id}).Body)
		}
		stats := e.Sim.Stats()

		sum, err := e.Operations.Audit(context.Background(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Examined != 4 || sum.New != 4 || sum.Skipped != 0 {
			t.Fatalf("summary = %+v, want 4 examined, 4 new", sum)
		}
		got := byPayment(listDiscrepancies(t, e, "?status=open"))
		want := map[string][]string{
			pl.refunded: {"amount_refunded_mismatch"}, pl.disputed: {"disputed"},
			pl.amount: {"amount_captured_mismatch"}, pl.paidBehind: {"paid_at_provider_not_here"},
		}
		for id, kinds := range want {
			if !slices.Equal(got[id], kinds) {
				t.Errorf("payment %s: kinds %v, want %v", id, got[id], kinds)
			}
		}
		if len(got) != len(want) {
			t.Errorf("discrepancies on %d payments, want %d: %v", len(got), len(want), got)
		}

		// A second pass refreshes, never duplicates.
		first := listDiscrepancies(t, e, "")
		e.Clock.Advance(time.Minute)
		if _, err := e.Operations.Audit(context.Background(), time.Hour); err != nil {
			t.Fatal(err)
		}
		second := listDiscrepancies(t, e, "")
		if len(second) != len(first) {
			t.Fatalf("second pass: %d discrepancies, want %d", len(second), len(first))
		}
		for i := range first {
			if second[i].ID != first[i].ID || second[i].FirstSeenAt != first[i].FirstSeenAt || second[i].LastCheckedAt <= first[i].LastCheckedAt {
				t.Errorf("second pass: %+v after %+v, want same id and first_seen_at, later last_checked_at", second[i], first[i])
			}
		}

		// The audit moved no money and changed no payment.
		if after := e.Sim.Stats(); after.Refunds != stats.Refunds || after.Captures != stats.Captures ||
			after.Cancels != stats.Cancels || after.Authorizations != stats.Authorizations {
			t.Errorf("provider effects %+v after the audit, want %+v", after, stats)
		}
		for _, id := range ids {
			if now := string(e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id}).Body); now != before[id] {
				t.Errorf("payment %s changed by the audit:\n%s\nwas\n%s", id, now, before[id])
			}
		}
	})

	t.Run("ResolvesThroughTheAPIWithAnAuditEntry", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		pl := plantDiscrepancies(t, e)
		if _, err := e.Operations.Audit(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		idOf := map[string]string{}
		for _, d := range listDiscrepancies(t, e, "?status=open") {
			idOf[d.PaymentID] = d.ID
		}
		resolve := func(paymentID, key, action string) *apitest.Response {
			return e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/discrepancies/" + idOf[paymentID] + "/resolve",
				Key: key, Bearer: apitest.AdminToken, Body: fmt.Sprintf(`{"actor":"ana","reason":"ticket 7","action":%q}`, action)})
		}
		payment := func(id string) map[string]any {
			return e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id}).JSON(t)
		}
		auditActions := func(id string) []string {
			r := e.Do(apitest.Request{Method: http.MethodGet, Path: "/admin/v1/payments/" + id, Bearer: apitest.AdminToken})
			var v struct {
				Audit []struct {
					Actor  string `json:"actor"`
					Action string `json:"action"`
				} `json:"audit"`
			}
			if err := json.Unmarshal(r.Body, &v); err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, a := range v.Audit {
				if a.Actor == "ana" {
					out = append(out, a.Action)
				}
			}
			return out
		}
		refunds := e.Sim.Stats().Refunds

		// note: resolved, nothing else changes.
		r := resolve(pl.disputed, "r-note", "note")
		apitest.WantStatus(t, r, http.StatusOK)
		if st := r.JSON(t)["status"]; st != "resolved" {
			t.Fatalf("note: status %v", st)
		}
		if got := auditActions(pl.disputed); !slices.Equal(got, []string{"discrepancy.resolved"}) {
			t.Errorf("note: audit %v", got)
		}
		again := resolve(pl.disputed, "r-note", "note")
		if again.Status != http.StatusOK || string(again.Body) != string(r.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("note replay: %d %s", again.Status, again.Body)
		}
		if other := resolve(pl.disputed, "r-note-2", "note"); other.Status != http.StatusConflict || other.Code(t) != "invalid_state" {
			t.Errorf("resolving a resolved discrepancy: %d %s", other.Status, other.Body)
		}

		// adopt_provider_state: the dashboard refund shows on the payment.
		apitest.WantStatus(t, resolve(pl.refunded, "r-adopt", "adopt_provider_state"), http.StatusOK)
		if p := payment(pl.refunded); p["amount_refunded"] != float64(500) {
			t.Errorf("adopt: amount_refunded %v, want 500", p["amount_refunded"])
		}
		if got := auditActions(pl.refunded); !slices.Equal(got, []string{"discrepancy.adopt_provider_state", "discrepancy.resolved"}) {
			t.Errorf("adopt: audit %v", got)
		}

		// refund: the payment paid behind our back is adopted, then refunded once.
		apitest.WantStatus(t, resolve(pl.paidBehind, "r-refund", "refund"), http.StatusOK)
		p := payment(pl.paidBehind)
		if p["status"] != "captured" || p["amount_captured"] != float64(2000) || p["amount_refunded"] != float64(2000) {
			t.Errorf("refund: payment %v", p)
		}
		if got := e.Sim.Stats().Refunds; got != refunds+1 {
			t.Errorf("refunds at the provider = %d, want %d", got, refunds+1)
		}
		apitest.WantStatus(t, resolve(pl.paidBehind, "r-refund", "refund"), http.StatusOK)
		if got := e.Sim.Stats().Refunds; got != refunds+1 {
			t.Errorf("after a replay, refunds at the provider = %d, want %d", got, refunds+1)
		}
		if got := auditActions(pl.paidBehind); !slices.Contains(got, "discrepancy.resolved") || !slices.Contains(got, "discrepancy.adopt_provider_state") {
			t.Errorf("refund: audit %v", got)
		}

		// Events: adopting emitted them for downstream.
		e.FeedCaughtUp(t) // other tests' transactions on the server may hold the feed
		evs := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/events"})
		var feed struct {
			Data []struct {
				Type    string `json:"type"`
				Payment struct {
					ID string `json:"id"`
				} `json:"payment"`
			} `json:"data"`
		}
		if err := json.Unmarshal(evs.Body, &feed); err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, ev := range feed.Data {
			if ev.Payment.ID == pl.refunded || ev.Payment.ID == pl.paidBehind {
				types = append(types, ev.Type)
			}
		}
		for _, want := range []string{"payment.refunded", "payment.captured"} {
			if !slices.Contains(types, want) {
				t.Errorf("events %v lack %s", types, want)
			}
		}
		if open := listDiscrepancies(t, e, "?status=open"); len(open) != 1 {
			t.Errorf("open after three resolutions: %v", open)
		}
	})

	t.Run("ReportsAPaymentTheProviderDoesNotKnow", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		r := e.Create("k-forgotten", `{"order_id":"dsc-forgotten","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`)
		apitest.WantStatus(t, r, http.StatusCreated)
		id, pi := r.JSON(t)["id"].(string), r.JSON(t)["provider_payment_id"].(string)
		if _, err := e.Sim.ForgetIntent(pi); err != nil {
			t.Fatal(err)
		}
		before := string(e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id}).Body)
		sum, err := e.Operations.Audit(context.Background(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Examined != 1 || sum.New != 1 || sum.Found["missing_at_provider"] != 1 {
			t.Errorf("summary = %+v, want one new missing_at_provider", sum)
		}
		got := listDiscrepancies(t, e, "?status=open&payment_id="+id)
		if len(got) != 1 || got[0].Kind != "missing_at_provider" || got[0].Ours["provider_payment_id"] != pi || got[0].Theirs["found"] != false {
			t.Fatalf("discrepancies %+v", got)
		}
		if now := string(e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id}).Body); now != before {
			t.Errorf("the audit changed the payment:\n%s\nwas\n%s", now, before)
		}
		// Neither adopting nor refunding has anything to act on.
		for _, action := range []string{"adopt_provider_state", "refund"} {
			res := resolveDsc(e, got[0].ID, "r-"+action, action)
			if res.Status != http.StatusConflict || res.Code(t) != "invalid_state" {
				t.Errorf("%s: %d %s", action, res.Status, res.Body)
			}
		}
		apitest.WantStatus(t, resolveDsc(e, got[0].ID, "r-note", "note"), http.StatusOK)
	})

	t.Run("AFailedListFallsBackToLookingUpEachPayment", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		pl := plantDiscrepancies(t, e)
		e.Sim.Inject(providersim.Fault{Op: "list_intents", Kind: providersim.Error500BeforeEffect})
		sum, err := e.Operations.Audit(context.Background(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Examined != 4 || sum.New != 4 || sum.Skipped != 0 {
			t.Fatalf("summary = %+v, want 4 examined, 4 new", sum)
		}
		got := byPayment(listDiscrepancies(t, e, "?status=open"))
		want := map[string][]string{
			pl.refunded: {"amount_refunded_mismatch"}, pl.disputed: {"disputed"},
			pl.amount: {"amount_captured_mismatch"}, pl.paidBehind: {"paid_at_provider_not_here"},
		}
		for id, kinds := range want {
			if !slices.Equal(got[id], kinds) {
				t.Errorf("payment %s: kinds %v, want %v", id, got[id], kinds)
			}
		}
		// Each slice the pass needed failed once and was not asked again.
		if n := countOp(e.Sim, "retrieve"); n < 4 {
			t.Errorf("%d retrieves, want each payment looked up alone", n)
		}
		if n := countOp(e.Sim, "list_intents"); n > 3 {
			t.Errorf("%d list calls, want each failed slice asked once", n)
		}
	})

	t.Run("AFailedDisputesLookupStillReportsTheRefundMismatch", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		pl := plantDiscrepancies(t, e)
		e.Sim.Inject(providersim.Fault{Op: "list_disputes", Kind: providersim.Error500BeforeEffect})
		sum, err := e.Operations.Audit(context.Background(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// The list flags the disputed payment; only its disputes need a
		// lookup of their own, and that one failed.
		if sum.Examined != 4 || sum.Skipped != 0 || sum.LookupsFailed != 1 || sum.Found["disputed"] != 0 {
			t.Errorf("summary = %+v, want 4 examined, none skipped, the dispute lookups failed", sum)
		}
		got := byPayment(listDiscrepancies(t, e, "?status=open"))
		want := map[string][]string{
			pl.refunded: {"amount_refunded_mismatch"}, pl.amount: {"amount_captured_mismatch"},
			pl.paidBehind: {"paid_at_provider_not_here"},
		}
		for id, kinds := range want {
			if !slices.Equal(got[id], kinds) {
				t.Errorf("payment %s: kinds %v, want %v", id, got[id], kinds)
			}
		}
		if len(got[pl.disputed]) != 0 {
			t.Errorf("a failed lookup concluded %v", got[pl.disputed])
		}
		// The next pass, with the provider answering, checks disputes again.
		e.Sim.ClearFaults()
		sum, err = e.Operations.Audit(context.Background(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if sum.LookupsFailed != 0 || sum.Found["disputed"] != 1 {
			t.Errorf("second pass summary = %+v, want the dispute found", sum)
		}
	})
}
