package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// byAttempt is a provider that searches by attempt and lists refunds
// without metadata, as Mercado Pago does; it records what it was asked.
type byAttempt struct {
	profiled
	refunds   []provider.Refund
	creds     []string
	attempts  []int
	listCalls int
}

func (p *byAttempt) SearchIntentByAttempt(_ context.Context, c provider.Credentials, _ string, n int) (*provider.Intent, error) {
	p.creds, p.attempts = append(p.creds, c.SecretKey), append(p.attempts, n)
	if p.found == nil {
		return nil, provider.ErrNotFound
	}
	return p.found, nil
}

func (p *byAttempt) ListRefunds(_ context.Context, c provider.Credentials, _ string) ([]provider.Refund, error) {
	p.creds = append(p.creds, c.SecretKey)
	p.listCalls++
	return p.refunds, nil
}

// refundStore holds the refunds of one payment: the attempt's own and
// all of them.
type refundStore struct {
	Store
	mine *Refund
	all  []*Refund
}

func (s refundStore) RefundGetByAttempt(context.Context, string) (*Refund, error) { return s.mine, nil }

func (s refundStore) RefundListByPayment(context.Context, string) ([]*Refund, error) {
	return s.all, nil
}

// mpService is a service with both providers and, when given, a store.
func mpService(t *testing.T, stripe, mp provider.Provider, now time.Time, store ...Store) *Service {
	t.Helper()
	var st Store = struct{ Store }{}
	if len(store) > 0 {
		st = store[0]
	}
	s, err := NewService(Config{Store: st, Provider: stripe,
		Providers: map[string]provider.Provider{ProviderMercadoPago: mp}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var mpAccount = Account{ID: "acct_1", Credentials: provider.Credentials{SecretKey: "sk_test_1"},
	Providers:           []string{ProviderMercadoPago, ProviderStripe},
	ProviderCredentials: map[string]provider.Credentials{ProviderMercadoPago: {SecretKey: "TEST-1"}}}

// A lost Mercado Pago authorization is looked up by its attempt, with the
// account's Mercado Pago credentials, and never re-sent.
func TestCallProviderMercadoPagoSearchesByAttempt(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	stripe := &profiled{profile: provider.StripeProfile(provider.StripeKeyRetention, time.Minute)}
	mp := &byAttempt{profiled: profiled{profile: provider.MercadoPagoProfile(0, 5*time.Minute),
		found: &provider.Intent{ID: "123", State: provider.IntentCaptured}}}
	s := mpService(t, stripe, mp, created.Add(time.Second))
	req, _ := json.Marshal(provider.AuthorizeRequest{IdempotencyKey: "pedido-842:autorizar-v2"})
	a := &Attempt{ID: "att_1", Operation: OpAuthorize, Number: 2, Request: req, Provider: ProviderMercadoPago, CreatedAt: created}
	out := s.CallProvider(context.Background(), mpAccount, &Payment{ID: "pay_1", Provider: ProviderMercadoPago}, a, true)
	if out.Outcome != provider.Succeeded || out.Intent == nil || out.Intent.ID != "123" {
		t.Fatalf("outcome %s intent %+v, want succeeded with 123", out.Outcome, out.Intent)
	}
	if mp.sends != 0 || stripe.sends != 0 || stripe.searches != 0 || len(mp.attempts) != 1 || mp.attempts[0] != 2 || mp.creds[0] != "TEST-1" {
		t.Fatalf("mp sends %d, attempts %v, creds %v; stripe sends %d searches %d", mp.sends, mp.attempts, mp.creds, stripe.sends, stripe.searches)
	}
}

// Mercado Pago keeps no metadata on refunds: a refund list without the
// service's refund id is read by elimination against the payment's other
// refunds (refundByElimination); at Stripe, past the key's window, the
// same list proves no refund.
func TestCallProviderRefundNotFoundByProvider(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	req, _ := json.Marshal(provider.RefundRequest{IdempotencyKey: "pedido-842:reembolsar-v1", IntentID: "123", Amount: 500,
		Metadata: map[string]string{"refund_id": "ref_1"}})
	mine := &Refund{ID: "ref_1", PaymentID: "pay_1", AttemptID: "att_r", Amount: 500, Status: RefundUnknown}
	other := func(status RefundStatus, providerID string, amount int64) []*Refund {
		return []*Refund{{ID: "ref_0", PaymentID: "pay_1", Amount: amount, Status: status, ProviderRefundID: providerID}, mine}
	}
	for _, tc := range []struct {
		name    string
		at      string
		listed  []int64 // the amounts of the refunds listed, ids 9, 10, …
		local   []*Refund
		want    provider.Outcome
		refund  string
		failure string
	}{
		{"StripeNoRefundWithItsID", ProviderStripe, []int64{500}, []*Refund{mine}, provider.Failed, "", "not_found_at_provider"},
		{"MercadoPagoTheOneUnclaimedRefund", ProviderMercadoPago, []int64{500}, []*Refund{mine}, provider.Succeeded, "9", ""},
		{"MercadoPagoUnclaimedOfAnotherAmount", ProviderMercadoPago, []int64{400}, []*Refund{mine}, provider.Failed, "", "not_found_at_provider"},
		{"MercadoPagoBesideDashboardRefunds", ProviderMercadoPago, []int64{100, 500, 100}, []*Refund{mine}, provider.Succeeded, "10", ""},
		{"MercadoPagoTwoThatFit", ProviderMercadoPago, []int64{500, 500}, []*Refund{mine}, provider.Unknown, "", ""},
		{"MercadoPagoClaimedByAnotherRefund", ProviderMercadoPago, []int64{500}, other(RefundSucceeded, "9", 500), provider.Failed, "", "not_found_at_provider"},
		{"MercadoPagoAnotherRefundInDoubt", ProviderMercadoPago, []int64{500}, other(RefundUnknown, "", 500), provider.Unknown, "", ""},
		{"MercadoPagoAnotherAmountInDoubt", ProviderMercadoPago, []int64{300, 500}, other(RefundUnknown, "", 300), provider.Succeeded, "10", ""},
		{"MercadoPagoAnotherRefundFailed", ProviderMercadoPago, []int64{500}, other(RefundFailed, "", 500), provider.Succeeded, "9", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var refunds []provider.Refund
			for i, amount := range tc.listed {
				refunds = append(refunds, provider.Refund{ID: strconv.Itoa(9 + i), State: provider.RefundSucceeded, Amount: amount, Metadata: map[string]string{}})
			}
			stripe := &byAttempt{profiled: profiled{profile: provider.StripeProfile(provider.StripeKeyRetention, time.Minute)}, refunds: refunds}
			mp := &byAttempt{profiled: profiled{profile: provider.MercadoPagoProfile(0, 5*time.Minute)}, refunds: refunds}
			s := mpService(t, stripe, mp, created.Add(48*time.Hour), refundStore{mine: mine, all: tc.local})
			a := &Attempt{ID: "att_r", Operation: OpRefund, Number: 1, Request: req, Provider: tc.at, CreatedAt: created}
			out := s.CallProvider(context.Background(), mpAccount, &Payment{ID: "pay_1", Provider: tc.at, ProviderPaymentID: "123"}, a, true)
			if out.Outcome != tc.want || out.FailureCode != tc.failure {
				t.Fatalf("outcome %s %q (%v), want %s %q", out.Outcome, out.FailureCode, out.Err, tc.want, tc.failure)
			}
			got := ""
			if out.Refund != nil {
				got = out.Refund.ID
			}
			if got != tc.refund {
				t.Fatalf("refund %q, want %q", got, tc.refund)
			}
			if stripe.listCalls+mp.listCalls != 1 || (tc.at == ProviderMercadoPago) != (mp.listCalls == 1) {
				t.Fatalf("refund lists: stripe %d, mercadopago %d", stripe.listCalls, mp.listCalls)
			}
		})
	}
}

// Within the search grace, no unclaimed refund at Mercado Pago proves
// nothing yet.
func TestCallProviderMercadoPagoRefundWithinGrace(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	req, _ := json.Marshal(provider.RefundRequest{IdempotencyKey: "pedido-842:reembolsar-v1", IntentID: "123", Amount: 500})
	mine := &Refund{ID: "ref_1", PaymentID: "pay_1", AttemptID: "att_r", Amount: 500, Status: RefundUnknown}
	mp := &byAttempt{profiled: profiled{profile: provider.MercadoPagoProfile(0, 5*time.Minute)}}
	s := mpService(t, &profiled{profile: provider.StripeProfile(provider.StripeKeyRetention, time.Minute)}, mp,
		created.Add(time.Minute), refundStore{mine: mine, all: []*Refund{mine}})
	a := &Attempt{ID: "att_r", Operation: OpRefund, Number: 1, Request: req, Provider: ProviderMercadoPago, CreatedAt: created}
	if out := s.CallProvider(context.Background(), mpAccount, &Payment{ID: "pay_1", Provider: ProviderMercadoPago, ProviderPaymentID: "123"}, a, true); out.Outcome != provider.Unknown {
		t.Fatalf("outcome %s, want unknown within the grace", out.Outcome)
	}
}

// A create runs at the account's first provider, a card token at Stripe,
// payment_methods at the first provider it names a card for; Mercado Pago
// without the payer's email is never tried, and when nothing can be tried
// the create is an invalid request.
func TestCreateProvider(t *testing.T) {
	t.Parallel()
	s := mpService(t, &profiled{profile: provider.StripeProfile(provider.StripeKeyRetention, time.Minute)},
		&byAttempt{profiled: profiled{profile: provider.MercadoPagoProfile(0, time.Minute)}}, time.Now())
	email := &BillingDetails{Email: "a@example.com"}
	mpCard := &provider.MercadoPagoCard{Token: "tok_APRO", PaymentMethodID: "visa", Installments: 1}
	both := &PaymentMethods{Stripe: "pm_card_visa", MercadoPago: mpCard}
	large := int64(50000)
	routed := mpAccount
	routed.Routing = &Routing{Rules: []RoutingRule{{Match: RouteMatch{PaymentMethod: MethodPix, MinAmount: &large}, Providers: []string{ProviderMercadoPago}}},
		Default: []string{ProviderStripe, ProviderMercadoPago}}
	for _, tc := range []struct {
		name    string
		acct    Account
		req     CreateRequest
		want    string
		wantErr string
	}{
		{"stripe alone", Account{ID: "a"}, CreateRequest{PaymentMethod: MethodPix}, ProviderStripe, ""},
		{"pix at the first provider", mpAccount, CreateRequest{PaymentMethod: MethodPix, BillingDetails: email}, ProviderMercadoPago, ""},
		{"boleto at the first provider", mpAccount, CreateRequest{PaymentMethod: MethodBoleto, BillingDetails: email}, ProviderMercadoPago, ""},
		{"a card token is stripe's", mpAccount, CreateRequest{PaymentMethod: "pm_card_visa"}, ProviderStripe, ""},
		{"no email: the next provider", mpAccount, CreateRequest{PaymentMethod: MethodPix}, ProviderStripe, ""},
		{"no email, no other provider", Account{ID: "a", Providers: []string{ProviderMercadoPago},
			ProviderCredentials: map[string]provider.Credentials{ProviderMercadoPago: {SecretKey: "TEST-1"}}},
			CreateRequest{PaymentMethod: MethodPix}, "", "billing_details.email"},
		{"routing: pix to stripe first", routed, CreateRequest{PaymentMethod: MethodPix, Currency: "BRL", Amount: 100, BillingDetails: email}, ProviderStripe, ""},
		{"routing: a large pix to mercadopago", routed, CreateRequest{PaymentMethod: MethodPix, Currency: "BRL", Amount: 100000, BillingDetails: email}, ProviderMercadoPago, ""},
		{"routing: a card token is still stripe's", routed, CreateRequest{PaymentMethod: "pm_card_visa", Currency: "BRL", Amount: 100}, ProviderStripe, ""},
		{"no credentials", Account{ID: "a", Providers: []string{ProviderMercadoPago}}, CreateRequest{PaymentMethod: MethodPix, BillingDetails: email}, "", "no credentials"},
		{"payment_methods: the first provider named", mpAccount, CreateRequest{PaymentMethods: both, BillingDetails: email}, ProviderMercadoPago, ""},
		{"payment_methods: mercadopago lacks the email", mpAccount, CreateRequest{PaymentMethods: both}, ProviderStripe, ""},
		{"payment_methods: stripe only", mpAccount, CreateRequest{PaymentMethods: &PaymentMethods{Stripe: "pm_card_visa"}, BillingDetails: email}, ProviderStripe, ""},
		{"payment_methods: mercadopago only", mpAccount, CreateRequest{PaymentMethods: &PaymentMethods{MercadoPago: mpCard}, BillingDetails: email}, ProviderMercadoPago, ""},
		{"payment_methods: nothing to try", mpAccount, CreateRequest{PaymentMethods: &PaymentMethods{MercadoPago: mpCard}}, "", "billing_details.email"},
		{"payment_methods: stripe's entry on an account without stripe", Account{ID: "a", Providers: []string{ProviderMercadoPago},
			ProviderCredentials: map[string]provider.Credentials{ProviderMercadoPago: {SecretKey: "TEST-1"}}},
			CreateRequest{PaymentMethods: &PaymentMethods{Stripe: "pm_card_visa"}, BillingDetails: email}, "", "payment_methods.mercadopago"},
		{"payment_methods: an account from before several providers", Account{ID: "a"}, CreateRequest{PaymentMethods: both}, ProviderStripe, ""},
		{"a card token without stripe", Account{ID: "a", Providers: []string{ProviderMercadoPago},
			ProviderCredentials: map[string]provider.Credentials{ProviderMercadoPago: {SecretKey: "TEST-1"}}},
			CreateRequest{PaymentMethod: "pm_card_visa"}, "", "Stripe is not on this payment's route"},
	} {
		route, err := s.createRoute(tc.acct, tc.req)
		if tc.wantErr != "" {
			e, ok := err.(*Error)
			if !ok || e.Code != CodeInvalidRequest {
				t.Fatalf("%s: err %v, want invalid_request", tc.name, err)
			}
			if text := fmt.Sprintf("%s %+v", e.Message, e.Fields); !strings.Contains(text, tc.wantErr) {
				t.Fatalf("%s: err %s does not name %s", tc.name, text, tc.wantErr)
			}
			continue
		}
		if err != nil || route[0] != tc.want {
			t.Fatalf("%s: route %q, %v; want %q first", tc.name, route, err, tc.want)
		}
	}
	// Every provider that can be tried is on the route, in the account's
	// order: the ones after the first are for a failover.
	route, err := s.createRoute(mpAccount, CreateRequest{PaymentMethods: both, BillingDetails: email})
	if err != nil || !slices.Equal(route, []string{ProviderMercadoPago, ProviderStripe}) {
		t.Fatalf("route %q, %v; want mercadopago then stripe", route, err)
	}
}
