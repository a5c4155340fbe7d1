package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestMercadoPagoDeclineThenAnotherCard: a payment Mercado Pago rejected
// takes no other card (each try is a payment of its own), so nothing is
// released there and the order's next attempt goes ahead. Before, the
// service sent a cancel Mercado Pago refuses for a rejected payment,
// armed it again after every refusal and held the order meanwhile: the
// shopper's second card got 409 order_has_active_payment for ever.
func TestMercadoPagoDeclineThenAnotherCard(t *testing.T) {
	t.Parallel()
	s := newMPShop(t, false)
	r := s.create("k-mprel-1", mpCardBody("pedido-mprel", "tok_OTHE", "automatic"))
	wantStatus(t, r, http.StatusCreated)
	first := r.JSON(t)
	if first["status"] != "declined" {
		t.Fatalf("payment %s, want declined", r.Body)
	}
	r = s.create("k-mprel-2", mpCardBody("pedido-mprel", "tok_APRO", "automatic"))
	wantStatus(t, r, http.StatusCreated)
	if p := r.JSON(t); p["status"] != "captured" || p["attempt"] != float64(2) {
		t.Fatalf("second card %s, want captured as attempt 2", r.Body)
	}
	s.Clock.Advance(time.Minute)
	runOnce(t, s.Env, nil)
	if n := countOp(s.Sim, "mp_update"); n != 0 {
		t.Fatalf("%d cancels sent to Mercado Pago, want none: a rejected payment cannot be paid", n)
	}
	pending, err := s.ReconcileStore().AttemptListUnresolvedByPayment(context.Background(), first["id"].(string))
	if err != nil || len(pending) != 0 {
		t.Fatalf("unresolved attempts of the declined payment: %+v (%v)", pending, err)
	}
}
