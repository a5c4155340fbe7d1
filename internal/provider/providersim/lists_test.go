package providersim_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/mercadopago"
	"github.com/acmepay/payments/internal/provider/providersim"
	"github.com/acmepay/payments/internal/provider/stripe"
)

// movableClock is a simulator clock a test moves.
type movableClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *movableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *movableClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// listAll pages a provider's list of [from, to) two at a time and returns
// the payment ids it showed, by provider id, and the pages it took.
func listAll(t *testing.T, l provider.Lister, c provider.Credentials, from, to time.Time) (map[string]provider.Listed, int) {
	t.Helper()
	out := map[string]provider.Listed{}
	q := provider.ListQuery{From: from, To: to, Limit: 2}
	for pages := 1; ; pages++ {
		page, err := l.ListIntents(context.Background(), c, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range page.Intents {
			if _, dup := out[in.Intent.ID]; dup {
				t.Fatalf("%s listed twice", in.Intent.ID)
			}
			out[in.Intent.ID] = in
		}
		if page.Next == "" {
			return out, pages
		}
		q.Cursor = page.Next
	}
}

func countOps(sim *providersim.Server, op string) int {
	n := 0
	for _, r := range sim.Requests() {
		if r.Op == op {
			n++
		}
	}
	return n
}

func paymentIDs(ls map[string]provider.Listed) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.PaymentID)
	}
	slices.Sort(out)
	return out
}

// Both providers' lists page through a time range as the real APIs do
// (Stripe's has_more and starting_after, Mercado Pago's paging offset and
// total), carry what the audit compares, and are counted as calls.
func TestListIntents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, op string
		adapter       func(base string) provider.Provider
		card          func(r *provider.AuthorizeRequest)
	}{
		{"Stripe", "sk_test_lists", "list_intents",
			func(base string) provider.Provider { return stripe.New(stripe.Config{APIBase: base}) },
			func(r *provider.AuthorizeRequest) { r.PaymentMethod = "pm_card_visa" }},
		{"MercadoPago", "TEST-lists", "mp_search",
			func(base string) provider.Provider {
				p, err := mercadopago.New(mercadopago.Config{APIBase: base})
				if err != nil {
					panic(err)
				}
				return p
			},
			func(r *provider.AuthorizeRequest) {
				r.MercadoPago = &provider.MercadoPagoCard{Token: "tok_APRO", PaymentMethodID: "visa", Installments: 1}
				r.BillingDetails = &provider.BillingDetails{Email: "buyer@example.com"}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := &movableClock{t: time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)}
			sim := providersim.New(providersim.Options{Now: clock.Now})
			srv := httptest.NewServer(sim)
			t.Cleanup(srv.Close)
			prov := tc.adapter(srv.URL)
			creds := provider.Credentials{SecretKey: tc.key}
			ctx := context.Background()
			charge := func(n int) string {
				r := provider.AuthorizeRequest{IdempotencyKey: fmt.Sprintf("o%d:autorizar-v1", n), Amount: 1000, Currency: "BRL",
					CaptureMethod: "automatic", Metadata: map[string]string{"payment_id": fmt.Sprintf("pay_%d", n), "attempt": "1"}}
				tc.card(&r)
				res := prov.Authorize(ctx, creds, r)
				if res.Intent == nil || res.Intent.State != provider.IntentCaptured {
					t.Fatalf("authorize %d: %+v", n, res)
				}
				return res.Intent.ID
			}
			start := clock.Now()
			first := make([]string, 5)
			for i := range first {
				first[i] = charge(i)
			}
			clock.add(2 * time.Hour)
			charge(5)
			// An early payment refunded late: Mercado Pago lists it by
			// that change, Stripe by its creation.
			if res := prov.Refund(ctx, creds, provider.RefundRequest{IdempotencyKey: "o0:reembolsar-1", IntentID: first[0], Amount: 300}); res.Refund == nil {
				t.Fatalf("refund: %+v", res)
			}
			var err error
			if tc.op == "mp_search" {
				id, _ := strconv.ParseInt(first[1], 10, 64)
				_, err = sim.MPOpenChargeback(id, 0, "fraud")
			} else {
				_, err = sim.OpenDispute(first[1], 0, "fraudulent")
			}
			if err != nil {
				t.Fatal(err)
			}
			lister := prov.(provider.Lister)
			lists := countOps(sim, tc.op)
			early, pages := listAll(t, lister, creds, start, start.Add(time.Hour))
			late, latePages := listAll(t, lister, creds, start.Add(time.Hour), start.Add(3*time.Hour))
			if got := countOps(sim, tc.op) - lists; got != pages+latePages {
				t.Errorf("%d list calls counted, want %d", got, pages+latePages)
			}
			disputed := early[first[1]]
			if lister.ListedBy() == provider.ListedByUpdated {
				disputed = late[first[1]]
			}
			if !disputed.Disputed || early[first[2]].Disputed {
				t.Errorf("disputed payment listed as %+v, another as %+v", disputed, early[first[2]])
			}
			refunded := early[first[0]]
			wantEarly := []string{"pay_0", "pay_1", "pay_2", "pay_3", "pay_4"}
			wantLate := []string{"pay_5"}
			if lister.ListedBy() == provider.ListedByUpdated {
				refunded = late[first[0]]
				wantEarly, wantLate = wantEarly[2:], []string{"pay_0", "pay_1", "pay_5"}
			}
			if got, want := paymentIDs(early), (len(wantEarly)+1)/2; !slices.Equal(got, wantEarly) || pages != want {
				t.Errorf("early range: %v in %d pages, want %v in %d", got, pages, wantEarly, want)
			}
			if got := paymentIDs(late); !slices.Equal(got, wantLate) {
				t.Errorf("late range: %v, want %v", got, wantLate)
			}
			if refunded.Refunded != 300 || refunded.Intent.AmountReceived != 1000 || refunded.Intent.State != provider.IntentCaptured {
				t.Errorf("refunded payment listed as %+v", refunded)
			}
		})
	}
}
