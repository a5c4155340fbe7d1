package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
)

// newMPCapturedEnv is newMPWebhookEnv with the Pix paid and its
// notification applied: a captured payment of 5000.
func newMPCapturedEnv(t *testing.T, order string) *mpWebhookEnv {
	t.Helper()
	w := newMPWebhookEnv(t, order)
	if _, err := w.Sim.MPPay(mustInt(t, w.mpID)); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-paid"), "applied")
	return w
}

func (w *mpWebhookEnv) amountRefunded(t *testing.T) float64 {
	t.Helper()
	p := getPaymentJSON(t, w.Env, w.paymentID)
	if p["status"] != "captured" {
		t.Fatalf("status = %v, want captured", p["status"])
	}
	return p["amount_refunded"].(float64)
}

// chargebackNote is a chargebacks notification as Mercado Pago sends it.
func chargebackNote(id string) string {
	return `{"action":"chargebacks.updated","api_version":"v1","type":"topic_chargebacks_wh","data":{"id":"` + id + `"}}`
}

func TestMercadoPagoWebhookRefunds(t *testing.T) {
	t.Parallel()
	t.Run("DashboardRefundsReachThePayment", func(t *testing.T) {
		t.Parallel()
		w := newMPCapturedEnv(t, "pedido-mpwh-dash")
		if _, err := w.Sim.MPDashboardRefund(mustInt(t, w.mpID), 1000); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-r1"), "applied")
		if got := w.amountRefunded(t); got != 1000 {
			t.Fatalf("amount_refunded = %v, want 1000", got)
		}
		// A redelivery, with a fresh x-request-id, changes nothing.
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-r1-again"), "duplicate")
		// A second partial refund of the same payment is a new change.
		if _, err := w.Sim.MPDashboardRefund(mustInt(t, w.mpID), 1500); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-r2"), "applied")
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-r2-again"), "duplicate")
		if got := w.amountRefunded(t); got != 2500 {
			t.Fatalf("amount_refunded = %v, want 2500", got)
		}
		// The rest makes the payment refunded at Mercado Pago.
		if _, err := w.Sim.MPDashboardRefund(mustInt(t, w.mpID), 2500); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-r3"), "applied")
		if got := w.amountRefunded(t); got != 5000 {
			t.Fatalf("amount_refunded = %v, want 5000", got)
		}
		if n := countTypes(t, w.Env, w.paymentID, "payment.refunded"); n != 3 {
			t.Fatalf("%d payment.refunded events, want 3", n)
		}
		// Learning of refunds moves no money.
		if n := countOp(w.Sim, "mp_refund"); n != 0 {
			t.Fatalf("%d refund requests at Mercado Pago, want 0", n)
		}
	})
	t.Run("PaidAndRefundedAtOnce", func(t *testing.T) {
		t.Parallel()
		// The first notification the service reads shows the Pix paid
		// and already refunded in part: both apply.
		w := newMPWebhookEnv(t, "pedido-mpwh-paidref")
		if _, err := w.Sim.MPPay(mustInt(t, w.mpID)); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Sim.MPDashboardRefund(mustInt(t, w.mpID), 1200); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-1"), "applied")
		if got := w.amountRefunded(t); got != 1200 {
			t.Fatalf("amount_refunded = %v, want 1200", got)
		}
	})
	t.Run("OwnRefundIsNotCountedTwice", func(t *testing.T) {
		t.Parallel()
		w := newMPCapturedEnv(t, "pedido-mpwh-own")
		r := w.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + w.paymentID + "/refunds", Body: `{"amount":2000}`, Key: "k-own-refund"})
		wantStatus(t, r, http.StatusCreated)
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-own"), "ignored")
		if got := w.amountRefunded(t); got != 2000 {
			t.Fatalf("amount_refunded = %v, want 2000", got)
		}
		if n := countTypes(t, w.Env, w.paymentID, "payment.refunded"); n != 1 {
			t.Fatalf("%d payment.refunded events, want 1", n)
		}
		if n := countOp(w.Sim, "mp_refund"); n != 1 {
			t.Fatalf("%d refund requests at Mercado Pago, want 1", n)
		}
	})
}

func TestMercadoPagoWebhookChargebacks(t *testing.T) {
	t.Parallel()
	t.Run("OpenedAndDecided", func(t *testing.T) {
		t.Parallel()
		w := newMPCapturedEnv(t, "pedido-mpwh-cb")
		cb, err := w.Sim.MPOpenChargeback(mustInt(t, w.mpID), 3000, "fraud")
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, w.deliverAbout(t, chargebackNote(cb.ID), cb.ID, "req-cb1"), "applied")
		p := getPaymentJSON(t, w.Env, w.paymentID)
		ds := p["disputes"].([]any)
		if len(ds) != 1 {
			t.Fatalf("disputes = %v", p["disputes"])
		}
		d := ds[0].(map[string]any)
		if d["id"] != cb.ID || d["amount"] != float64(3000) || d["reason"] != "fraud" || d["status"] != "pending" || d["evidence_due_by"] == nil {
			t.Fatalf("dispute = %v", d)
		}
		if p["status"] != "captured" || p["amount_refunded"] != float64(0) {
			t.Fatalf("a chargeback changed the payment's state: %v", p)
		}
		// The payment's own notification reads the same chargeback.
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-cb1-payment"), "duplicate")

		if _, err := w.Sim.MPDecideChargeback(cb.ID, false); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-cb2-payment"), "applied")
		wantOutcome(t, w.deliverAbout(t, chargebackNote(cb.ID), cb.ID, "req-cb2"), "duplicate")
		d = getPaymentJSON(t, w.Env, w.paymentID)["disputes"].([]any)[0].(map[string]any)
		if d["status"] != "lost" || d["evidence_due_by"] != nil {
			t.Fatalf("dispute after the decision = %v", d)
		}
		if n := countTypes(t, w.Env, w.paymentID, "payment.disputed"); n != 1 {
			t.Fatalf("%d payment.disputed events, want 1", n)
		}
		if n := countTypes(t, w.Env, w.paymentID, "payment.dispute_closed"); n != 1 {
			t.Fatalf("%d payment.dispute_closed events, want 1", n)
		}
	})
	t.Run("SimulatorDelivers", func(t *testing.T) {
		t.Parallel()
		w := newMPCapturedEnv(t, "pedido-mpwh-cbsim")
		token := "TEST-" + w.Account.ID
		w.Sim.RegisterWebhookEndpoint(token, w.URL+"/webhooks/mercadopago/"+w.Account.ID, w.secret)
		w.Sim.DuplicateWebhooks(true)
		if _, err := w.Sim.MPDashboardRefund(mustInt(t, w.mpID), 500); err != nil {
			t.Fatal(err)
		}
		cb, err := w.Sim.MPOpenChargeback(mustInt(t, w.mpID), 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Sim.MPDecideChargeback(cb.ID, true); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), apitest.WaitTimeout)
		defer cancel()
		if err := w.Sim.WaitWebhooks(ctx); err != nil {
			t.Fatalf("notifications not delivered: %v", err)
		}
		for _, d := range w.Sim.WebhookDeliveries() {
			if d.Status != http.StatusOK {
				t.Fatalf("delivery %+v, want 200", d)
			}
		}
		p := getPaymentJSON(t, w.Env, w.paymentID)
		if p["amount_refunded"] != float64(500) {
			t.Fatalf("amount_refunded = %v, want 500", p["amount_refunded"])
		}
		if ds := p["disputes"].([]any); len(ds) != 1 || ds[0].(map[string]any)["status"] != "won" || ds[0].(map[string]any)["amount"] != float64(4500) {
			t.Fatalf("disputes = %v", p["disputes"])
		}
		if n := countTypes(t, w.Env, w.paymentID, "payment.dispute_closed"); n != 1 {
			t.Fatalf("%d payment.dispute_closed events, want 1", n)
		}
		if n := countTypes(t, w.Env, w.paymentID, "payment.refunded"); n != 1 {
			t.Fatalf("%d payment.refunded events, want 1", n)
		}
	})
}
