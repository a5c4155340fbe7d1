package account

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acmepay/payments/internal/payment"
)

// routing is the stored routing; nil when none is set.
func (r Row) routing() (*payment.Routing, error) {
	if r.Routing == nil {
		return nil, nil
	}
	var rt payment.Routing
	if err := json.Unmarshal(r.Routing, &rt); err != nil {
		return nil, fmt.Errorf("account %s: read routing: %w", r.ID, err)
	}
	return &rt, nil
}

// Routing returns the routing an account's creates follow: the one set,
// or without one no rules and its providers in the order they were added.
func (s *Service) Routing(ctx context.Context, id string) (payment.Routing, error) {
	row, err := s.store.AccountGetByID(ctx, id)
	if err != nil {
		return payment.Routing{}, err
	}
	return effectiveRouting(row)
}

func effectiveRouting(row Row) (payment.Routing, error) {
	rt, err := row.routing()
	if err != nil || rt == nil {
		return payment.Routing{Rules: []payment.RoutingRule{}, Default: row.providers()}, err
	}
	if rt.Rules == nil {
		rt.Rules = []payment.RoutingRule{}
	}
	return *rt, nil
}

// SetRouting checks a routing against the providers the account has
// credentials for and stores it, under the account's row lock so that it
// is checked against what it is stored beside. Instances that
// authenticated the account's API key in the last 30 s may route by the
// former routing until their cache expires.
func (s *Service) SetRouting(ctx context.Context, id string, b payment.RoutingBody) (payment.Routing, error) {
	row, err := s.store.AccountUpdateRouting(ctx, id, func(r Row) ([]byte, error) {
		rt, err := b.Check(r.providers())
		if err != nil {
			return nil, err
		}
		return json.Marshal(rt)
	})
	if err != nil {
		return payment.Routing{}, err
	}
	s.forget(id)
	return effectiveRouting(row)
}
