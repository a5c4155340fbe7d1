package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
)

// mpPaid creates a Pix at Mercado Pago on w's account, pays it and
// applies its notification; it returns the payment's and Mercado Pago's
// ids.
func (w *mpWebhookEnv) mpPaid(t *testing.T, order string) (string, int64) {
	t.Helper()
	p := createAt(t, w.Env, mpMerchant(w.Env), "k-"+order, fmt.Sprintf(mpPixBody, order))
	mpID := mustInt(t, p["provider_payment_id"].(string))
	if _, err := w.Sim.MPPay(mpID); err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(mpID, 10)
	wantOutcome(t, w.deliverAbout(t, mpNote(id), id, "req-paid-"+order), "applied")
	return p["id"].(string), mpID
}

// The audit compares Mercado Pago payments with Mercado Pago: what
// happened there while the notification was lost is found, and a payment
// that agrees is not.
func TestAuditMercadoPago(t *testing.T) {
	t.Parallel()
	w := newMPWebhookEnv(t, "pedido-mpdsc-open")
	matching, _ := w.mpPaid(t, "pedido-mpdsc-ok")
	refunded, refundedMP := w.mpPaid(t, "pedido-mpdsc-refund")
	if _, err := w.Sim.MPDashboardRefund(refundedMP, 1200); err != nil {
		t.Fatal(err)
	}
	disputed, disputedMP := w.mpPaid(t, "pedido-mpdsc-cb")
	if _, err := w.Sim.MPOpenChargeback(disputedMP, 0, "fraud"); err != nil {
		t.Fatal(err)
	}
	behind := createAt(t, w.Env, mpMerchant(w.Env), "k-pedido-mpdsc-behind", fmt.Sprintf(mpPixBody, "pedido-mpdsc-behind"))
	behindID := behind["id"].(string)
	wantStatus(t, w.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + behindID + "/cancel", Key: "k-mpdsc-cancel"}), http.StatusOK)
	if _, err := w.Sim.MPPayBehind(mustInt(t, behind["provider_payment_id"].(string))); err != nil {
		t.Fatal(err)
	}
	stats := w.Sim.Stats()

	sum, err := w.Operations.Audit(context.Background(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The first Pix is still waiting for the customer: not final, not audited.
	if sum.Examined != 4 || sum.Skipped != 0 || sum.LookupsFailed != 0 || sum.New != 3 {
		t.Fatalf("summary = %+v, want 4 examined, 3 new", sum)
	}
	got := byPayment(listDiscrepancies(t, w.Env, "?status=open"))
	want := map[string][]string{
		refunded: {"amount_refunded_mismatch"}, disputed: {"disputed"}, behindID: {"paid_at_provider_not_here"},
	}
	for id, kinds := range want {
		if !slices.Equal(got[id], kinds) {
			t.Errorf("payment %s: kinds %v, want %v", id, got[id], kinds)
		}
	}
	if len(got[matching]) != 0 || len(got) != len(want) {
		t.Errorf("discrepancies %v, want none on the matching payment %s", got, matching)
	}
	for _, d := range listDiscrepancies(t, w.Env, "?payment_id="+refunded) {
		if d.Ours["amount_refunded"] != float64(0) || d.Theirs["amount_refunded"] != float64(1200) {
			t.Errorf("refund discrepancy ours %v theirs %v", d.Ours, d.Theirs)
		}
	}
	// The audit only reads.
	after := w.Sim.Stats()
	after.Requests = stats.Requests
	if after != stats {
		t.Errorf("provider effects %+v after the audit, want %+v", after, stats)
	}
	testResolveMercadoPago(t, w, refunded, behindID)
}

// testResolveMercadoPago resolves two of the audit's findings: the
// dashboard refund adopted, then its late notification changes nothing;
// the payment paid behind the service's back refunded once at Mercado
// Pago.
func testResolveMercadoPago(t *testing.T, w *mpWebhookEnv, refunded, behind string) {
	t.Helper()
	idOf := map[string]string{}
	for _, d := range listDiscrepancies(t, w.Env, "?status=open") {
		idOf[d.PaymentID] = d.ID
	}
	resolve := func(paymentID, key, action string) *apitest.Response {
		return w.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/discrepancies/" + idOf[paymentID] + "/resolve",
			Key: key, Bearer: apitest.AdminToken, Body: fmt.Sprintf(`{"actor":"ana","reason":"ticket 9","action":%q}`, action)})
	}
	wantStatus(t, resolve(refunded, "r-mp-adopt", "adopt_provider_state"), http.StatusOK)
	if p := getPaymentJSON(t, w.Env, refunded); p["amount_refunded"] != float64(1200) {
		t.Fatalf("adopt: amount_refunded %v, want 1200", p["amount_refunded"])
	}
	mpID := getPaymentJSON(t, w.Env, refunded)["provider_payment_id"].(string)
	wantOutcome(t, w.deliverAbout(t, mpNote(mpID), mpID, "req-late-refund"), "ignored")
	if n := countTypes(t, w.Env, refunded, "payment.refunded"); n != 1 {
		t.Fatalf("%d payment.refunded events after the late notification, want 1", n)
	}

	wantStatus(t, resolve(behind, "r-mp-refund", "refund"), http.StatusOK)
	wantStatus(t, resolve(behind, "r-mp-refund", "refund"), http.StatusOK)
	p := getPaymentJSON(t, w.Env, behind)
	if p["status"] != "captured" || p["amount_captured"] != float64(5000) || p["amount_refunded"] != float64(5000) {
		t.Fatalf("refund: payment %v", p)
	}
	if n := countOp(w.Sim, "mp_refund"); n != 1 {
		t.Fatalf("%d refund requests at Mercado Pago, want 1", n)
	}
	mps := w.Sim.MPPayments("TEST-" + w.Account.ID)
	for _, m := range mps {
		if strconv.FormatInt(m.ID, 10) == p["provider_payment_id"] && (m.Status != "refunded" || m.Refunded != 5000) {
			t.Fatalf("at Mercado Pago: %+v", m)
		}
	}
}
