package mercadopago

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/provider"
)

func eventIDs(evs []provider.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.EventID)
	}
	return out
}

// A payment notification reads the payment: its state, its refunded total
// (partial or whole), and its chargebacks only when it shows one.
func TestNotifiedPaymentEvents(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, payment string
		want          []string
		refunded      int64
	}{
		{"approved", paymentJSON("approved", "accredited", `"captured":true`), []string{"mp:123:captured:"}, 0},
		{"partly refunded", paymentJSON("approved", "partially_refunded", `"captured":true,"transaction_amount_refunded":2.5`),
			[]string{"mp:123:captured:", "mp:123:refunded:250"}, 250},
		{"refunded without the total", paymentJSON("refunded", "refunded", `"captured":true`),
			[]string{"mp:123:captured:", "mp:123:refunded:1050"}, 1050},
		{"charged back", paymentJSON("charged_back", "in_process", `"captured":true`),
			[]string{"mp:123:captured:", "mp:chargeback:9:pending:1796083200"}, 0},
		{"rejected", paymentJSON("rejected", "cc_rejected_other_reason", ""), []string{"mp:123:needs_payment_method:cc_rejected_other_reason"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeMP{answer: func(s seen) (int, string) {
				if strings.HasSuffix(s.path, "/v1/chargebacks/search") {
					return 200, `{"results":[{"id":9,"payments":[123],"amount":10.5,"reason":"fraud","coverage_applied":null,
"documentation_required":true,"documentation_status":"pending","date_documentation_deadline":"2026-12-01T00:00:00.000Z"}]}`
				}
				return 200, c.payment
			}}
			evs, err := newFake(t, f).NotifiedEvents(context.Background(), creds, TopicPayment, "payment.updated", "123")
			if err != nil {
				t.Fatal(err)
			}
			if got := eventIDs(evs); !slices.Equal(got, c.want) {
				t.Fatalf("events %v, want %v", got, c.want)
			}
			for _, e := range evs {
				switch e.Kind {
				case provider.EventRefunded:
					if e.AmountRefunded != c.refunded || e.IntentID != "123" || e.Intent != nil {
						t.Errorf("refunded event %+v", e)
					}
				case provider.EventDispute:
					if e.Dispute == nil || e.Dispute.ID != "9" || e.Dispute.Amount != 1050 || e.IntentID != "123" {
						t.Errorf("dispute event %+v", e)
					}
				}
			}
		})
	}
}

// A chargebacks notification reads the chargeback, then its payment; the
// chargeback is the one retrieved, so no search is made.
func TestNotifiedChargebackEvents(t *testing.T) {
	t.Parallel()
	f := &fakeMP{answer: func(s seen) (int, string) {
		switch {
		case strings.HasSuffix(s.path, "/v1/chargebacks/77"):
			return 200, `{"id":"77","payments":["123"],"amount":4,"reason":"fraud","coverage_applied":false,"documentation_status":"invalid"}`
		case strings.HasSuffix(s.path, "/v1/chargebacks/78"):
			return 404, `{"message":"not found","status":404}`
		case strings.HasSuffix(s.path, "/v1/payments/123"):
			return 200, paymentJSON("charged_back", "settled", `"captured":true`)
		}
		return 500, `{}`
	}}
	p := newFake(t, f)
	for _, topic := range []string{TopicChargebacks, "chargebacks"} {
		evs, err := p.NotifiedEvents(context.Background(), creds, topic, "", "77")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := eventIDs(evs), []string{"mp:123:captured:", "mp:chargeback:77:lost"}; !slices.Equal(got, want) {
			t.Fatalf("%s: events %v, want %v", topic, got, want)
		}
		if d := evs[1].Dispute; evs[1].Kind != provider.EventDispute || !d.Closed || d.Amount != 400 || evs[1].Type != topic {
			t.Fatalf("%s: dispute event %+v", topic, evs[1])
		}
	}
	for _, s := range f.requests() {
		if strings.HasSuffix(s.path, "/search") {
			t.Fatalf("a chargeback notification searched: %s", s.path)
		}
	}
	evs, err := p.NotifiedEvents(context.Background(), creds, TopicChargebacks, "chargebacks.updated", "78")
	if err != nil || len(evs) != 1 || evs[0].Kind != provider.EventOther {
		t.Fatalf("an unknown chargeback: %+v, %v", evs, err)
	}
}

// A failed read is an error, so the notification is delivered again; an
// unknown payment is an ignored event.
func TestNotifiedEventsErrors(t *testing.T) {
	t.Parallel()
	p := newFake(t, &fakeMP{answer: always(http.StatusInternalServerError, `{"message":"boom","status":500}`)})
	if _, err := p.NotifiedEvents(context.Background(), creds, TopicPayment, "payment.updated", "123"); err == nil {
		t.Fatal("a failed retrieve gave events")
	}
	p = newFake(t, &fakeMP{answer: func(s seen) (int, string) {
		if strings.HasSuffix(s.path, "/search") {
			return 503, `{}`
		}
		return 200, paymentJSON("charged_back", "in_process", `"captured":true`)
	}})
	if _, err := p.NotifiedEvents(context.Background(), creds, TopicPayment, "payment.updated", "123"); err == nil {
		t.Fatal("a failed chargeback search gave events")
	}
	p = newFake(t, &fakeMP{answer: always(http.StatusNotFound, `{"message":"not found","status":404}`)})
	evs, err := p.NotifiedEvents(context.Background(), creds, TopicPayment, "payment.updated", "123")
	if err != nil || len(evs) != 1 || evs[0].EventID != "mp:123:not_found" || evs[0].Kind != provider.EventOther {
		t.Fatalf("an unknown payment: %+v, %v", evs, err)
	}
	if _, err := p.NotifiedEvents(context.Background(), creds, "merchant_order", "", "1"); err == nil {
		t.Fatal("an unread topic gave events")
	}
}
