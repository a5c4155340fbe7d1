package api_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider"
)

// auditCostPayments is how many final payments TestAuditCost seeds at each
// provider; AUDIT_COST_PAYMENTS=1000 measures a thousand.
func auditCostPayments(t *testing.T) int {
	n := 250
	if v := os.Getenv("AUDIT_COST_PAYMENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 50 {
			t.Fatalf("AUDIT_COST_PAYMENTS=%q: want a number of at least 50", v)
		}
	}
	return n
}

// auditCostBound is what an audit of n payments may cost: a page of 100
// per provider account, a page per neighbouring slice probed for a payment
// the list lacked, and a lookup of its own for each planted payment the
// list cannot settle (created before its slice, missing there, disputed).
func auditCostBound(n int) int { return (n+99)/100 + 8 }

// auditAndCount runs one audit over the whole window and returns its
// summary and the provider calls it made.
func auditAndCount(t *testing.T, e *apitest.Env) (int, map[string][]string) {
	t.Helper()
	before, logged := e.Sim.Stats().Requests, len(e.Sim.Requests())
	sum, err := e.Operations.Audit(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Skipped != 0 || sum.LookupsFailed != 0 {
		t.Fatalf("summary %+v: want nothing skipped or failed", sum)
	}
	ops := map[string]int{}
	for _, r := range e.Sim.Requests()[logged:] {
		ops[r.Op]++
	}
	t.Logf("provider calls by operation: %v", ops)
	return e.Sim.Stats().Requests - before, byPayment(listDiscrepancies(t, e, "?status=open"))
}

func wantKinds(t *testing.T, got, want map[string][]string) {
	t.Helper()
	for id, kinds := range want {
		if !slices.Equal(got[id], kinds) {
			t.Errorf("payment %s: kinds %v, want %v", id, got[id], kinds)
		}
	}
	if len(got) != len(want) {
		t.Errorf("discrepancies on %d payments, want %d: %v", len(got), len(want), got)
	}
}

// unlisted hides an adapter's provider.Lister, and forwards what else the
// service asks of it, so the audit looks every payment up alone: the
// per-payment audit the lists replaced, as a baseline.
func unlisted(_ string, p provider.Provider) provider.Provider {
	c, _ := p.(provider.Clocked)
	if as, ok := p.(provider.AttemptSearcher); ok {
		return struct {
			provider.Provider
			provider.Clocked
			provider.AttemptSearcher
		}{p, c, as}
	}
	return struct {
		provider.Provider
		provider.Clocked
	}{p, c}
}

// The audit reads each provider's side in pages of 100: its provider calls
// grow with the pages, not with the payments, and it still finds every
// planted difference, including one on a payment made long before it was
// refunded. PerPayment runs the same audit with the lists hidden, as the
// baseline: about three calls per payment.
func TestAuditCost(t *testing.T) {
	t.Parallel()
	n := auditCostPayments(t)
	for _, tc := range []struct {
		name  string
		opts  apitest.Options
		bound func(n int) int
	}{
		{"Listed", apitest.Options{}, auditCostBound},
		{"PerPayment", apitest.Options{WrapProvider: unlisted}, func(n int) int { return 3 * n }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testAuditCost(t, n, tc.opts, tc.bound)
		})
	}
}

func testAuditCost(t *testing.T, n int, opts apitest.Options, bound func(n int) int) {
	t.Run("Stripe", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, opts)
		captured := func(order string) (string, string) {
			r := e.Create("k-"+order, fmt.Sprintf(`{"order_id":%q,"amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`, order))
			apitest.WantStatus(t, r, http.StatusCreated)
			p := r.JSON(t)
			return p["id"].(string), p["provider_payment_id"].(string)
		}
		// Made five hours ago, refunded through the API now and in the
		// dashboard too: Stripe lists by creation, so this one is looked up
		// alone.
		old, oldPI := captured("cost-old")
		e.Clock.Advance(5 * time.Hour)
		apitest.WantStatus(t, e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + old + "/refunds",
			Key: "k-old-refund", Body: `{"amount":300}`}), http.StatusCreated)
		if _, err := e.Sim.DashboardRefund(oldPI, 200); err != nil {
			t.Fatal(err)
		}
		ids := []string{old}
		pis := []string{oldPI}
		for i := 1; i < n; i++ {
			id, pi := captured(fmt.Sprintf("cost-%d", i))
			ids, pis = append(ids, id), append(pis, pi)
		}
		plant := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		_, err := e.Sim.DashboardRefund(pis[10], 500)
		plant(err)
		_, err = e.Sim.OpenDispute(pis[20], 0, "fraudulent")
		plant(err)
		_, err = e.Sim.SetAmountReceived(pis[30], 1500)
		plant(err)
		_, err = e.Sim.ForgetIntent(pis[40])
		plant(err)

		calls, got := auditAndCount(t, e)
		wantKinds(t, got, map[string][]string{
			old: {"amount_refunded_mismatch"}, ids[10]: {"amount_refunded_mismatch"}, ids[20]: {"disputed"},
			ids[30]: {"amount_captured_mismatch"}, ids[40]: {"missing_at_provider"},
		})
		if calls > bound(n) {
			t.Errorf("the audit of %d payments made %d provider calls, want at most %d", n, calls, bound(n))
		}
		t.Logf("%s: %d final payments audited with %d provider calls (%.0f per 1,000 payments)", t.Name(), n, calls, float64(calls)*1000/float64(n))
	})

	t.Run("MercadoPago", func(t *testing.T) {
		t.Parallel()
		s := newMPShopWith(t, opts)
		card := func(order, capture string) (string, int64) {
			r := s.create("k-"+order, mpCardBody(order, "tok_APRO", capture))
			wantStatus(t, r, http.StatusCreated)
			p := r.JSON(t)
			return p["id"].(string), mustInt(t, p["provider_payment_id"].(string))
		}
		// Made five hours ago and refunded there now: Mercado Pago lists by
		// last change, so the list shows it.
		old, oldMP := card("mpcost-old", "automatic")
		e := s.Env
		e.Clock.Advance(5 * time.Hour)
		if _, err := e.Sim.MPDashboardRefund(oldMP, 700); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, s.post("/v1/payments/"+old+"/refunds", "k-mpcost-old-refund", `{"amount":100}`), http.StatusCreated)
		behind, behindMP := card("mpcost-behind", "manual")
		wantStatus(t, s.post("/v1/payments/"+behind+"/cancel", "k-mpcost-cancel", ""), http.StatusOK)
		if _, err := e.Sim.MPPayBehind(behindMP); err != nil {
			t.Fatal(err)
		}
		ids, mps := []string{old, behind}, []int64{oldMP, behindMP}
		for i := 2; i < n; i++ {
			id, mp := card(fmt.Sprintf("mpcost-%d", i), "automatic")
			ids, mps = append(ids, id), append(mps, mp)
		}
		if _, err := e.Sim.MPDashboardRefund(mps[10], 1200); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Sim.MPOpenChargeback(mps[20], 0, "fraud"); err != nil {
			t.Fatal(err)
		}

		// Mercado Pago's search lags its writes: a payment changed within
		// MERCADOPAGO_SEARCH_GRACE of the list is looked up alone.
		e.Clock.Advance(10 * time.Minute)
		calls, got := auditAndCount(t, e)
		wantKinds(t, got, map[string][]string{
			old: {"amount_refunded_mismatch"}, behind: {"paid_at_provider_not_here"},
			ids[10]: {"amount_refunded_mismatch"}, ids[20]: {"disputed"},
		})
		if calls > bound(n) {
			t.Errorf("the audit of %d payments made %d provider calls, want at most %d", n, calls, bound(n))
		}
		t.Logf("%s: %d final payments audited with %d provider calls (%.0f per 1,000 payments)", t.Name(), n, calls, float64(calls)*1000/float64(n))
	})
}
