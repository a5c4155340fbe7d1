package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/reconcile"
)

// paidMPPix is a Pix of 5000 at Mercado Pago, paid by the customer and
// captured through its notification.
func paidMPPix(t *testing.T, order string) *mpWebhookEnv {
	t.Helper()
	w := newMPWebhookEnv(t, order)
	if _, err := w.Sim.MPPay(mustInt(t, w.mpID)); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, w.deliver(t, mpNote(w.mpID), "req-paid"), "applied")
	if got := getPaymentJSON(t, w.Env, w.paymentID)["status"]; got != "captured" {
		t.Fatalf("status = %v, want captured", got)
	}
	return w
}

func (w *mpWebhookEnv) refund(key, body string) *apitest.Response {
	return w.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments/" + w.paymentID + "/refunds", Key: key, Body: body})
}

func (w *mpWebhookEnv) reconcileOnce(t *testing.T) {
	t.Helper()
	r, err := reconcile.New(reconcile.Config{Payments: w.Payments, Store: w.ReconcileStore(), Now: w.ServiceClock(),
		Accounts: fixedAccounts{mpMerchant(w.Env)}, After: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunOnce(context.Background()); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
}

// TestMercadoPagoRefundInDoubt: Mercado Pago keeps no metadata on refunds,
// and without a key retention a refund whose answer was lost is never sent
// again, so the reconciler tells it from the payment's refunds there: the
// one no other refund claims. Before, such a refund stayed unknown for
// ever, and the refunded amount differed from Mercado Pago's.
func TestMercadoPagoRefundInDoubt(t *testing.T) {
	t.Parallel()
	t.Run("MadeButTheAnswerWasLost", func(t *testing.T) {
		t.Parallel()
		w := paidMPPix(t, "pedido-mprf-lost")
		// A first refund the service knows claims its own refund there.
		wantStatus(t, w.refund("k-r1", `{"amount":1000}`), http.StatusCreated)
		drop := w.Sim.Inject(providersim.Fault{Op: "mp_refund", Kind: providersim.DropAfterEffect, Times: 1})
		wantStatus(t, w.refund("k-r2", `{"amount":1500}`), http.StatusAccepted)
		drop.Remove()
		w.reconcileOnce(t)
		if got := getPaymentJSON(t, w.Env, w.paymentID)["amount_refunded"]; got != float64(2500) {
			t.Fatalf("amount_refunded = %v, want 2500", got)
		}
		r := w.refund("k-r2", `{"amount":1500}`)
		wantStatus(t, r, http.StatusCreated)
		if got := r.JSON(t)["status"]; got != "succeeded" {
			t.Fatalf("refund status = %v, want succeeded", got)
		}
		if n := countOp(w.Sim, "mp_refund"); n != 2 {
			t.Fatalf("%d refund requests at Mercado Pago, want 2: a key is never re-sent", n)
		}
	})
	t.Run("BesideADashboardRefund", func(t *testing.T) {
		t.Parallel()
		// A refund of another amount made in the dashboard is never
		// this one: the one that fits is.
		w := paidMPPix(t, "pedido-mprf-dash")
		if _, err := w.Sim.MPDashboardRefund(mustInt(t, w.mpID), 700); err != nil {
			t.Fatal(err)
		}
		drop := w.Sim.Inject(providersim.Fault{Op: "mp_refund", Kind: providersim.DropAfterEffect, Times: 1})
		wantStatus(t, w.refund("k-r1", `{"amount":1500}`), http.StatusAccepted)
		drop.Remove()
		w.reconcileOnce(t)
		r := w.refund("k-r1", `{"amount":1500}`)
		wantStatus(t, r, http.StatusCreated)
		if got := r.JSON(t)["status"]; got != "succeeded" {
			t.Fatalf("refund status = %v, want succeeded", got)
		}
	})
	t.Run("NotMadeFailsOnlyPastTheGrace", func(t *testing.T) {
		t.Parallel()
		w := paidMPPix(t, "pedido-mprf-none")
		fail := w.Sim.Inject(providersim.Fault{Op: "mp_refund", Kind: providersim.Error500BeforeEffect, Times: 1})
		wantStatus(t, w.refund("k-r1", `{"amount":1500}`), http.StatusAccepted)
		fail.Remove()
		w.reconcileOnce(t)
		// Within MERCADOPAGO_SEARCH_GRACE nothing found proves nothing.
		wantStatus(t, w.refund("k-r1", `{"amount":1500}`), http.StatusAccepted)
		w.Clock.Advance(6 * time.Minute)
		w.reconcileOnce(t)
		r := w.refund("k-r1", `{"amount":1500}`)
		wantStatus(t, r, http.StatusConflict)
		if got := r.JSON(t)["provider_code"]; got != "not_found_at_provider" {
			t.Fatalf("provider_code = %v, want not_found_at_provider", got)
		}
		if got := getPaymentJSON(t, w.Env, w.paymentID)["amount_refunded"]; got != float64(0) {
			t.Fatalf("amount_refunded = %v, want 0", got)
		}
		if n := countOp(w.Sim, "mp_refund"); n != 1 {
			t.Fatalf("%d refund requests at Mercado Pago, want 1", n)
		}
	})
	t.Run("AnotherRefundInDoubtKeepsItUnknown", func(t *testing.T) {
		t.Parallel()
		w := paidMPPix(t, "pedido-mprf-two")
		drop := w.Sim.Inject(providersim.Fault{Op: "mp_refund", Kind: providersim.DropAfterEffect, Times: 2})
		wantStatus(t, w.refund("k-r1", `{"amount":1000}`), http.StatusAccepted)
		wantStatus(t, w.refund("k-r2", `{"amount":1000}`), http.StatusAccepted)
		drop.Remove()
		w.reconcileOnce(t)
		// Two refunds of one amount in doubt: neither can be told apart.
		wantStatus(t, w.refund("k-r1", `{"amount":1000}`), http.StatusAccepted)
		if got := getPaymentJSON(t, w.Env, w.paymentID)["amount_refunded"]; got != float64(0) {
			t.Fatalf("amount_refunded = %v, want 0 while both are in doubt", got)
		}
	})
}
