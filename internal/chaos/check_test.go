package chaos

import (
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/provider/providersim"
)

// world is a synthetic end state: the provider's intents, the database and
// what clients were shown.
type world struct {
	intents []providersim.Intent
	st      *localState
	f       *fleet
}

func newWorld() *world {
	return &world{
		st: &localState{Payments: map[string]*localPayment{}, ByProviderID: map[string]*localPayment{},
			Refunds: map[string]string{}, Deliveries: map[string]int{}},
		f: newFleet(nil, "", "test"),
	}
}

func (w *world) intent(id, order, paymentID, status string, amount int64) {
	in := providersim.Intent{ID: id, Status: status, Amount: amount, PaymentMethod: "pm_card_visa", LatestCharge: "ch_" + id,
		Metadata: map[string]string{"order_id": order, "payment_id": paymentID}}
	switch status {
	case "succeeded":
		in.AmountReceived = amount
	case "requires_payment_method":
		in.PaymentMethod = "" // a decline detaches the card
	}
	w.intents = append(w.intents, in)
}

func (w *world) payment(id, order, status, providerID string, captured int64) {
	p := &localPayment{ID: id, OrderID: order, Status: status, ProviderID: providerID, Attempt: 1, AmountCaptured: captured}
	w.st.Payments[id] = p
	if providerID != "" {
		w.st.ByProviderID[providerID] = p
	}
}

func (w *world) shown(order, paymentID, status string) {
	w.f.obs = append(w.f.obs, observation{Order: order, PaymentID: paymentID, Status: status, Via: "test"})
}

func (w *world) check() *Report {
	r := &Report{}
	r.check(w.intents, w.st, w.f)
	return r
}

func TestCheckRaces(t *testing.T) {
	t.Parallel()
	r := &Report{}
	r.checkRaces([]providersim.Request{
		{Op: "capture", IdempotencyKey: "o1:capturar-v1"}, {Op: "capture", IdempotencyKey: "o1:capturar-v1"},
		{Op: "cancel", IdempotencyKey: "o2:cancelar-v1"},
		{Op: "capture", IdempotencyKey: "o3:capturar-v1"}, {Op: "cancel", IdempotencyKey: "o3:cancelar-v1"},
	})
	if r.BothSent != 1 || !strings.Contains(strings.Join(r.Samples, ""), "order o3") {
		t.Fatalf("BothSent %d, samples %v; want order o3 only", r.BothSent, r.Samples)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	// A consistent world: an auto capture, a manual authorization captured
	// later by its client, a decline followed by a second card.
	clean := func() *world {
		w := newWorld()
		w.intent("pi_1", "o1", "pay_1", "succeeded", 1000)
		w.payment("pay_1", "o1", "captured", "pi_1", 1000)
		w.shown("o1", "pay_1", "captured")
		w.intent("pi_2", "o2", "pay_2", "succeeded", 500)
		w.payment("pay_2", "o2", "captured", "pi_2", 500)
		w.shown("o2", "pay_2", "authorized")
		w.f.noteOp("pay_2", "capture")
		w.intent("pi_3", "o3", "pay_3", "requires_payment_method", 700)
		w.payment("pay_3", "o3", "declined", "pi_3", 0)
		w.shown("o3", "pay_3", "declined")
		w.intent("pi_4", "o3", "pay_4", "requires_capture", 700)
		w.payment("pay_4", "o3", "authorized", "pi_4", 0)
		w.shown("o3", "pay_4", "authorized")
		return w
	}
	if r := clean().check(); r.Violations() != 0 {
		t.Fatalf("a consistent world has %d violations: %v", r.Violations(), r.Samples)
	}

	for _, c := range []struct {
		name   string
		mutate func(w *world)
		got    func(r *Report) int
		want   string
	}{
		{"DoubleChargeOfOneOrder", func(w *world) {
			w.intent("pi_9", "o1", "pay_9", "succeeded", 1000)
			w.payment("pay_9", "o1", "failed", "", 0)
		}, func(r *Report) int { return r.DoubleCharges }, "double charge: order o1"},
		{"LostPaymentWhenTheProviderCharged", func(w *world) {
			w.intent("pi_5", "o5", "pay_5", "succeeded", 300)
			w.payment("pay_5", "o5", "failed", "", 0)
		}, func(r *Report) int { return r.LostPayments }, "lost payment: intent pi_5"},
		{"LostPaymentWithNoLocalRecord", func(w *world) {
			w.intent("pi_6", "o6", "pay_6", "requires_capture", 300)
		}, func(r *Report) int { return r.LostPayments }, "has no local payment"},
		{"PhantomSuccess", func(w *world) {
			w.payment("pay_7", "o7", "captured", "pi_nowhere", 300)
		}, func(r *Report) int { return r.Phantoms }, "phantom: payment pay_7"},
		{"LieAuthorizedThenCanceledByNobody", func(w *world) {
			w.st.Payments["pay_4"].Status = "canceled"
			w.intents[3].Status = "canceled"
		}, func(r *Report) int { return r.Lies }, "lie: order o3 was shown payment pay_4 authorized"},
		{"LieFailedWhileTheProviderCharged", func(w *world) {
			w.intent("pi_8", "o8", "pay_8", "succeeded", 300)
			w.payment("pay_8", "o8", "failed", "", 0)
			w.shown("o8", "pay_8", "failed")
		}, func(r *Report) int { return r.Lies }, "the provider has it captured"},
		{"AmountsDiffer", func(w *world) {
			w.st.Payments["pay_1"].AmountRefunded = 10
		}, func(r *Report) int { return r.AmountMismatches }, "amounts: payment pay_1"},
		{"Stranded", func(w *world) {
			w.st.UnresolvedPayments = 1
		}, func(r *Report) int { return r.Stranded }, "stranded: 1 payments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := clean()
			c.mutate(w)
			r := w.check()
			if c.got(r) == 0 {
				t.Fatalf("not detected; samples %v", r.Samples)
			}
			if !strings.Contains(strings.Join(r.Samples, "\n"), c.want) {
				t.Fatalf("samples %v lack %q", r.Samples, c.want)
			}
		})
	}
}
