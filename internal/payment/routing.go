package payment

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// RouteMatch is what a routing rule matches; every field is optional and
// an empty match matches every create.
type RouteMatch struct {
	PaymentMethod string `json:"payment_method,omitempty"`
	Currency      string `json:"currency,omitempty"`
	MinAmount     *int64 `json:"min_amount,omitempty"`
	MaxAmount     *int64 `json:"max_amount,omitempty"`
}

// RoutingRule sends the creates it matches to its providers, in order of
// preference.
type RoutingRule struct {
	Match     RouteMatch `json:"match"`
	Providers []string   `json:"providers"`
}

// Routing is an account's choice of providers per create (CONTRACT §15).
type Routing struct {
	Rules   []RoutingRule `json:"rules"`
	Default []string      `json:"default"`
}

// MaxRoutingRules bounds a routing: every create walks its rules.
const MaxRoutingRules = 50

// Route returns the providers of the first rule that matches, in order of
// preference, or Default when none does. nil (no routing, or an empty one)
// means the account's providers in the order they were added.
func (r *Routing) Route(method, currency string, amount int64) []string {
	if r == nil {
		return nil
	}
	for _, rule := range r.Rules {
		if rule.Match.matches(method, currency, amount) {
			return slices.Clone(rule.Providers)
		}
	}
	if len(r.Default) == 0 {
		return nil
	}
	return slices.Clone(r.Default)
}

func (m RouteMatch) matches(method, currency string, amount int64) bool {
	switch {
	case m.PaymentMethod != "" && m.PaymentMethod != method:
		return false
	case m.Currency != "" && !strings.EqualFold(m.Currency, currency):
		return false
	case m.MinAmount != nil && amount < *m.MinAmount:
		return false
	case m.MaxAmount != nil && amount > *m.MaxAmount:
		return false
	}
	return true
}

// RouteMethod is the create's method as routing matches it: pix, boleto,
// or card (payment_methods, or a bare card token).
func RouteMethod(req CreateRequest) string {
	switch m := req.Method(); m {
	case MethodPix, MethodBoleto:
		return m
	}
	return MethodCard
}

// Route returns the providers a create is tried at, in order: the
// account's routing, or without one its providers in the order added.
func (a Account) Route(req CreateRequest) []string {
	if ps := a.Routing.Route(RouteMethod(req), req.Currency, req.Amount); ps != nil {
		return ps
	}
	if len(a.Providers) == 0 {
		return []string{ProviderStripe}
	}
	return slices.Clone(a.Providers)
}

// RoutingBody is a routing as a request spells it, before Check.
type RoutingBody struct {
	Rules   []routingRuleBody `json:"rules"`
	Default []string          `json:"default"`
}

type routingRuleBody struct {
	Match     routeMatchBody `json:"match"`
	Providers []string       `json:"providers"`
}

type routeMatchBody struct {
	PaymentMethod *string        `json:"payment_method"`
	Currency      *string        `json:"currency"`
	MinAmount     jsontext.Value `json:"min_amount"`
	MaxAmount     jsontext.Value `json:"max_amount"`
}

// ParseRouting decodes and checks a routing for an account that has
// credentials for the providers in have.
func ParseRouting(body []byte, have []string) (Routing, error) {
	b, err := DecodeRouting(body)
	if err != nil {
		return Routing{}, err
	}
	return b.Check(have)
}

// DecodeRouting decodes a routing strictly; Check validates it once the
// account's providers are known.
func DecodeRouting(body []byte) (RoutingBody, error) {
	var b RoutingBody
	err := DecodeStrict(body, &b)
	return b, err
}

// Check validates a decoded routing against the providers the account has
// credentials for, and normalizes it (currencies upper case). Field
// problems are reported together.
func (b RoutingBody) Check(have []string) (Routing, error) {
	var fe []FieldError
	bad := func(field, msg string) { fe = append(fe, FieldError{Field: field, Message: msg}) }
	out := Routing{Rules: []RoutingRule{}}
	if len(b.Rules) > MaxRoutingRules {
		bad("rules", fmt.Sprintf("must have at most %d rules", MaxRoutingRules))
	} else {
		for i, rb := range b.Rules {
			field := fmt.Sprintf("rules.%d", i)
			out.Rules = append(out.Rules, RoutingRule{Match: rb.Match.check(field+".match", bad),
				Providers: checkProviders(field+".providers", rb.Providers, have, bad)})
		}
	}
	out.Default = checkProviders("default", b.Default, have, bad)
	if len(fe) > 0 {
		return Routing{}, &Error{Code: CodeInvalidRequest, Message: "the routing has invalid fields", Fields: fe}
	}
	return out, nil
}

func (mb routeMatchBody) check(field string, bad func(field, msg string)) RouteMatch {
	var m RouteMatch
	if mb.PaymentMethod != nil {
		switch *mb.PaymentMethod {
		case MethodCard, MethodPix, MethodBoleto:
			m.PaymentMethod = *mb.PaymentMethod
		default:
			bad(field+".payment_method", "must be card, pix or boleto")
		}
	}
	if mb.Currency != nil {
		if c, err := ParseCurrency(*mb.Currency); err != nil {
			bad(field+".currency", err.Error())
		} else {
			m.Currency = c
		}
	}
	amount := func(name string, raw jsontext.Value) *int64 {
		if len(raw) == 0 {
			return nil
		}
		n, ok := ParseAmount(raw)
		if !ok {
			bad(field+"."+name, fmt.Sprintf("must be an integer from 1 to %d (minor units)", MaxAmount))
			return nil
		}
		return &n
	}
	m.MinAmount = amount("min_amount", mb.MinAmount)
	m.MaxAmount = amount("max_amount", mb.MaxAmount)
	if m.MinAmount != nil && m.MaxAmount != nil && *m.MinAmount > *m.MaxAmount {
		bad(field+".max_amount", "must not be less than min_amount")
	}
	return m
}

// checkProviders refuses an empty list, an unknown or repeated provider,
// and one the account has no credentials for.
func checkProviders(field string, ps, have []string, bad func(field, msg string)) []string {
	if len(ps) == 0 {
		bad(field, "must name at least one provider")
		return nil
	}
	for i, p := range ps {
		f := fmt.Sprintf("%s.%d", field, i)
		switch {
		case p != ProviderStripe && p != ProviderMercadoPago:
			bad(f, "must be stripe or mercadopago")
		case slices.Contains(ps[:i], p):
			bad(f, "names a provider already in the list")
		case !slices.Contains(have, p):
			bad(f, "is a provider the account has no credentials for")
		}
	}
	return slices.Clone(ps)
}
