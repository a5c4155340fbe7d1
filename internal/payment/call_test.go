package payment

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// profiled answers authorizations and searches by a profile, and counts
// what it was asked.
type profiled struct {
	provider.Provider
	profile          provider.Profile
	sends, searches  int
	found            *provider.Intent
	authorizeAnswers provider.Answer
	// ahead is how far the provider's answers show its clock ahead.
	ahead time.Duration
}

func (p *profiled) Profile() provider.Profile { return p.profile }
func (p *profiled) Retries() int              { return 0 }

func (p *profiled) Clock() *provider.Clock {
	local := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := provider.NewClock(func() time.Time { return local })
	c.Observe(local.Add(p.ahead))
	return c
}

func (p *profiled) Authorize(context.Context, provider.Credentials, provider.AuthorizeRequest) provider.Result {
	p.sends++
	return provider.Result{Answer: p.authorizeAnswers}
}

func (p *profiled) SearchIntentByPaymentID(context.Context, provider.Credentials, string) (*provider.Intent, error) {
	p.searches++
	if p.found == nil {
		return nil, provider.ErrNotFound
	}
	return p.found, nil
}

// A recovery re-sends the key only while the profile's retention keeps it,
// by the service's clock and the provider's, and after a lookup found
// nothing; a provider without retention (Mercado Pago's default) is only
// looked up, and not found proves nothing before the profile's search lag.
func TestCallProviderRecoveryByProfile(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	req, _ := json.Marshal(provider.AuthorizeRequest{IdempotencyKey: "pedido-842:autorizar-v1"})
	for _, tc := range []struct {
		name                  string
		profile               provider.Profile
		after                 time.Duration
		ahead                 time.Duration
		recovered             bool
		wantSends, wantSearch int
		want                  provider.Outcome
	}{
		{"stripe in window looks up, then re-sends", provider.StripeProfile(provider.StripeKeyRetention, time.Minute), time.Minute, 0, true, 1, 1, provider.Unknown},
		{"stripe in window, the provider's clock past it, looks up only", provider.StripeProfile(provider.StripeKeyRetention, time.Minute), 2 * time.Minute, 24 * time.Hour, true, 0, 1, provider.Failed},
		{"stripe in window, the provider's clock behind, re-sends", provider.StripeProfile(provider.StripeKeyRetention, time.Minute), time.Minute, -time.Hour, true, 1, 1, provider.Unknown},
		{"stripe past window looks up", provider.StripeProfile(provider.StripeKeyRetention, time.Minute), 25 * time.Hour, 0, true, 0, 1, provider.Failed},
		{"mercadopago without retention looks up at once", provider.MercadoPagoProfile(0, 5*time.Minute), time.Second, 0, true, 0, 1, provider.Unknown},
		{"mercadopago without retention, past the lag", provider.MercadoPagoProfile(0, 5*time.Minute), 5 * time.Minute, 0, true, 0, 1, provider.Failed},
		{"mercadopago with retention looks up, then re-sends in window", provider.MercadoPagoProfile(time.Hour, 5*time.Minute), time.Minute, 0, true, 1, 1, provider.Unknown},
		{"mercadopago first send is sent", provider.MercadoPagoProfile(0, 5*time.Minute), 0, 0, false, 1, 0, provider.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prov := &profiled{profile: tc.profile, authorizeAnswers: provider.AnswerIndeterminate, ahead: tc.ahead}
			s, err := NewService(Config{Store: struct{ Store }{}, Provider: prov, Now: func() time.Time { return created.Add(tc.after) }})
			if err != nil {
				t.Fatal(err)
			}
			a := &Attempt{ID: "att_1", Operation: OpAuthorize, Number: 1, Request: req, CreatedAt: created}
			out := s.CallProvider(context.Background(), Account{}, &Payment{ID: "pay_1"}, a, tc.recovered)
			if prov.sends != tc.wantSends || prov.searches != tc.wantSearch || out.Outcome != tc.want {
				t.Fatalf("sends %d, searches %d, outcome %s; want %d, %d, %s",
					prov.sends, prov.searches, out.Outcome, tc.wantSends, tc.wantSearch, tc.want)
			}
		})
	}
}
