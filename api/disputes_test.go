package api_test

import (
	"net/http"
	"slices"
	"testing"
)

func TestDisputes(t *testing.T) {
	t.Parallel()

	t.Run("WebhooksAttachCreatedUpdatedClosedOnce", func(t *testing.T) {
		t.Parallel()
		w := newAsyncEnv(t)
		r := w.create("k-dispute", `{"order_id":"dispute-1","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`)
		wantStatus(t, r, http.StatusCreated)
		p := r.JSON(t)
		id, pi := p["id"].(string), p["provider_payment_id"].(string)
		if ds, ok := p["disputes"].([]any); !ok || len(ds) != 0 {
			t.Fatalf("a new payment's disputes = %v, want []", p["disputes"])
		}
		w.hooks(t)

		w.Sim.DuplicateWebhooks(true)
		d, err := w.Sim.OpenDispute(pi, 1500, "product_not_received")
		if err != nil {
			t.Fatal(err)
		}
		w.hooks(t)
		got := w.get(t, id)
		ds := got["disputes"].([]any)
		if len(ds) != 1 {
			t.Fatalf("disputes after created = %v", got["disputes"])
		}
		first := ds[0].(map[string]any)
		if first["id"] != d.ID || first["amount"] != float64(1500) || first["reason"] != "product_not_received" ||
			first["status"] != "needs_response" || first["evidence_due_by"] == nil {
			t.Errorf("dispute = %v", first)
		}
		if got["status"] != "captured" || got["amount_refunded"] != float64(0) {
			t.Errorf("a dispute changed the payment's state: %v", got)
		}

		if _, err := w.Sim.UpdateDispute(d.ID, "under_review"); err != nil {
			t.Fatal(err)
		}
		w.hooks(t)
		if st := w.get(t, id)["disputes"].([]any)[0].(map[string]any)["status"]; st != "under_review" {
			t.Errorf("after updated: status %v", st)
		}
		if _, err := w.Sim.CloseDispute(d.ID, "lost"); err != nil {
			t.Fatal(err)
		}
		w.hooks(t)
		if st := w.get(t, id)["disputes"].([]any)[0].(map[string]any)["status"]; st != "lost" {
			t.Errorf("after closed: status %v", st)
		}

		// Each event was delivered twice; each applied once.
		types := w.eventTypes(t, id)
		var disputeEvents []string
		for _, ty := range types {
			if ty == "payment.disputed" || ty == "payment.dispute_closed" {
				disputeEvents = append(disputeEvents, ty)
			}
		}
		if want := []string{"payment.disputed", "payment.disputed", "payment.dispute_closed"}; !slices.Equal(disputeEvents, want) {
			t.Errorf("events %v, want %v", disputeEvents, want)
		}
	})
}
