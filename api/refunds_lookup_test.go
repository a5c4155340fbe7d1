package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

func getRefund(e *apitest.Env, id, bearer string) *apitest.Response {
	e.T.Helper()
	return e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/refunds/" + id, Bearer: bearer})
}

func listRefunds(e *apitest.Env, paymentID, query, bearer string) *apitest.Response {
	e.T.Helper()
	return e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + paymentID + "/refunds" + query, Bearer: bearer})
}

// refundIDs reads the ids of a refund list and its has_more.
func refundIDs(t *testing.T, r *apitest.Response) ([]string, bool) {
	t.Helper()
	wantStatus(t, r, http.StatusOK)
	l := r.JSON(t)
	if l["object"] != "list" {
		t.Fatalf("list = %s", r.Body)
	}
	var ids []string
	for _, d := range l["data"].([]any) {
		ids = append(ids, d.(map[string]any)["id"].(string))
	}
	return ids, l["has_more"].(bool)
}

func TestRefundLookup(t *testing.T) {
	t.Parallel()

	t.Run("ListPagesOldestFirstAndGetReadsOne", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		id := captured(t, e, "pedido-rl", 3000)
		var want []string
		for i, key := range []string{"rl-1", "rl-2", "rl-3"} {
			r := refund(e, id, key, 100*(i+1))
			wantStatus(t, r, http.StatusCreated)
			want = append(want, r.JSON(t)["id"].(string))
			e.Clock.Advance(time.Second) // distinct created_at: the order is the clock's
		}

		all, more := refundIDs(t, listRefunds(e, id, "", ""))
		if more || len(all) != 3 || all[0] != want[0] || all[1] != want[1] || all[2] != want[2] {
			t.Fatalf("list = %v (has_more %v), want %v", all, more, want)
		}
		first, more := refundIDs(t, listRefunds(e, id, "?limit=2", ""))
		if !more || len(first) != 2 || first[0] != want[0] || first[1] != want[1] {
			t.Fatalf("first page = %v (has_more %v)", first, more)
		}
		rest, more := refundIDs(t, listRefunds(e, id, "?limit=2&starting_after="+first[1], ""))
		if more || len(rest) != 1 || rest[0] != want[2] {
			t.Fatalf("second page = %v (has_more %v)", rest, more)
		}

		got := getRefund(e, want[1], "")
		wantStatus(t, got, http.StatusOK)
		if rf := got.JSON(t); rf["object"] != "refund" || rf["payment_id"] != id || rf["amount"] != float64(200) || rf["status"] != "succeeded" {
			t.Fatalf("refund = %s", got.Body)
		}
	})

	t.Run("AnotherAccountsRefundIsNotFound", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		id := captured(t, e, "pedido-rl-other", 1000)
		r := refund(e, id, "rl-other", 400)
		wantStatus(t, r, http.StatusCreated)
		refundID := r.JSON(t)["id"].(string)
		_, otherKey := e.CreateAccount("Loja Dois", "sk_test_other"+apitest.SecretSuffix(t))

		wantProblem(t, getRefund(e, refundID, otherKey), http.StatusNotFound, "not_found")
		wantProblem(t, listRefunds(e, id, "", otherKey), http.StatusNotFound, "not_found")
		wantProblem(t, getRefund(e, "re_0000000000000000000000000000dead", ""), http.StatusNotFound, "not_found")
	})

	t.Run("StartingAfterOfAnotherPaymentIsRefused", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		a := captured(t, e, "pedido-rl-a", 1000)
		b := captured(t, e, "pedido-rl-b", 1000)
		ra := refund(e, a, "rl-a", 100)
		wantStatus(t, ra, http.StatusCreated)
		wantStatus(t, refund(e, b, "rl-b", 100), http.StatusCreated)

		wantProblem(t, listRefunds(e, b, "?starting_after="+ra.JSON(t)["id"].(string), ""), http.StatusBadRequest, "invalid_request")
		wantProblem(t, listRefunds(e, b, "?starting_after=nope", ""), http.StatusBadRequest, "invalid_request")
		wantProblem(t, listRefunds(e, b, "?limit=0", ""), http.StatusBadRequest, "invalid_request")
	})

	t.Run("UnknownRefundCanBeReadUntilItSettles", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		id := captured(t, e, "pedido-rl-unk", 2000)
		drop := e.Sim.Inject(providersim.Fault{Op: "refund", Kind: providersim.DropAfterEffect, Times: 2})
		first := refund(e, id, "rl-unk", 700)
		wantStatus(t, first, http.StatusAccepted)
		drop.Remove()
		refundID := first.JSON(t)["id"].(string)

		if rf := getRefund(e, refundID, "").JSON(t); rf["status"] != "unknown" {
			t.Fatalf("refund before reconciliation = %v", rf)
		}
		wantSummary(t, runOnce(t, e, nil), 1, map[string]int{"refunded": 1}, 0)
		if rf := getRefund(e, refundID, "").JSON(t); rf["status"] != "succeeded" || rf["provider_refund_id"] == nil {
			t.Fatalf("refund after reconciliation = %v", rf)
		}
		ids, _ := refundIDs(t, listRefunds(e, id, "", ""))
		if len(ids) != 1 || ids[0] != refundID {
			t.Fatalf("list = %v", ids)
		}
		if st := e.Sim.Stats(); st.Refunds != 1 {
			t.Fatalf("refunds at the provider = %d, want 1", st.Refunds)
		}
	})
}
