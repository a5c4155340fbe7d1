package payment

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func amt(n int64) *int64 { return &n }

func TestRoutingRoute(t *testing.T) {
	t.Parallel()
	r := &Routing{
		Rules: []RoutingRule{
			{Match: RouteMatch{PaymentMethod: "pix"}, Providers: []string{"mercadopago"}},
			{Match: RouteMatch{Currency: "BRL", MinAmount: amt(100), MaxAmount: amt(500)}, Providers: []string{"mercadopago", "stripe"}},
			{Match: RouteMatch{Currency: "BRL"}, Providers: []string{"stripe", "mercadopago"}},
			{Match: RouteMatch{MinAmount: amt(10000)}, Providers: []string{"mercadopago"}},
			{Match: RouteMatch{MaxAmount: amt(5)}, Providers: []string{"mercadopago", "stripe"}},
			{Match: RouteMatch{PaymentMethod: "boleto", Currency: "USD"}, Providers: []string{"mercadopago"}},
		},
		Default: []string{"stripe"},
	}
	for _, c := range []struct {
		method, currency string
		amount           int64
		want             []string
	}{
		{"pix", "USD", 50, []string{"mercadopago"}},               // rule 0: method only
		{"pix", "BRL", 200, []string{"mercadopago"}},              // first match wins over rule 1
		{"card", "BRL", 100, []string{"mercadopago", "stripe"}},   // min inclusive
		{"card", "brl", 500, []string{"mercadopago", "stripe"}},   // max inclusive, currency any case
		{"card", "BRL", 99, []string{"stripe", "mercadopago"}},    // below min: next rule
		{"boleto", "BRL", 501, []string{"stripe", "mercadopago"}}, // above max: next rule
		{"card", "USD", 10000, []string{"mercadopago"}},           // min alone
		{"card", "USD", 5, []string{"mercadopago", "stripe"}},     // max alone
		{"boleto", "USD", 50, []string{"mercadopago"}},            // method and currency
		{"card", "USD", 50, []string{"stripe"}},                   // nothing matches: default
		{"boleto", "EUR", 50, []string{"stripe"}},                 // method matches, currency not
	} {
		if got := r.Route(c.method, c.currency, c.amount); !slices.Equal(got, c.want) {
			t.Errorf("Route(%s, %s, %d) = %v, want %v", c.method, c.currency, c.amount, got, c.want)
		}
	}
	var none *Routing
	if got := none.Route("card", "BRL", 100); got != nil {
		t.Errorf("nil routing routes to %v", got)
	}
	if got := (&Routing{}).Route("card", "BRL", 100); got != nil {
		t.Errorf("empty routing routes to %v", got)
	}
	// A caller that changes the answer does not change the routing.
	got := r.Route("card", "USD", 50)
	got[0] = "mercadopago"
	if r.Default[0] != "stripe" {
		t.Error("Route returned the routing's own slice")
	}
}

func TestRouteMethodAndAccountRoute(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		req  CreateRequest
		want string
	}{
		{CreateRequest{PaymentMethod: "pix"}, "pix"},
		{CreateRequest{PaymentMethod: "boleto"}, "boleto"},
		{CreateRequest{PaymentMethod: "pm_card_visa"}, "card"},
		{CreateRequest{PaymentMethods: &PaymentMethods{Stripe: "pm_card_visa"}}, "card"},
	} {
		if got := RouteMethod(c.req); got != c.want {
			t.Errorf("RouteMethod(%+v) = %q, want %q", c.req, got, c.want)
		}
	}
	req := CreateRequest{PaymentMethod: "pix", Currency: "BRL", Amount: 1000}
	a := Account{Providers: []string{"stripe", "mercadopago"}}
	if got := a.Route(req); !slices.Equal(got, []string{"stripe", "mercadopago"}) {
		t.Errorf("without routing: %v, want the providers in the order added", got)
	}
	if got := (Account{}).Route(req); !slices.Equal(got, []string{"stripe"}) {
		t.Errorf("an account from before providers: %v, want stripe", got)
	}
	a.Routing = &Routing{Rules: []RoutingRule{{Match: RouteMatch{PaymentMethod: "pix"}, Providers: []string{"mercadopago"}}},
		Default: []string{"stripe"}}
	if got := a.Route(req); !slices.Equal(got, []string{"mercadopago"}) {
		t.Errorf("pix with a rule: %v", got)
	}
	req.PaymentMethod = "pm_card_visa"
	if got := a.Route(req); !slices.Equal(got, []string{"stripe"}) {
		t.Errorf("card with no rule: %v, want the default", got)
	}
}

func TestParseRouting(t *testing.T) {
	t.Parallel()
	both := []string{"stripe", "mercadopago"}
	ok, err := ParseRouting([]byte(`{"rules":[{"match":{"payment_method":"card","currency":"brl","min_amount":100,"max_amount":1e3},`+
		`"providers":["mercadopago","stripe"]},{"match":{},"providers":["stripe"]}],"default":["stripe"]}`), both)
	if err != nil {
		t.Fatalf("a valid routing: %v", err)
	}
	want := Routing{Rules: []RoutingRule{
		{Match: RouteMatch{PaymentMethod: "card", Currency: "BRL", MinAmount: amt(100), MaxAmount: amt(1000)}, Providers: []string{"mercadopago", "stripe"}},
		{Match: RouteMatch{}, Providers: []string{"stripe"}},
	}, Default: []string{"stripe"}}
	if g, w := mustJSON(ok), mustJSON(want); g != w {
		t.Fatalf("parsed %+v, want %+v", ok, want)
	}
	if r, err := ParseRouting([]byte(`{"default":["mercadopago"]}`), both); err != nil || r.Rules == nil || len(r.Rules) != 0 {
		t.Fatalf("rules omitted: %+v, %v; want no rules (an empty list)", r, err)
	}

	many := `{"rules":[` + strings.TrimSuffix(strings.Repeat(`{"match":{},"providers":["stripe"]},`, MaxRoutingRules+1), ",") + `],"default":["stripe"]}`
	for _, c := range []struct {
		name, body, field string
		have              []string
	}{
		{"method", `{"rules":[{"match":{"payment_method":"pm_card_visa"},"providers":["stripe"]}],"default":["stripe"]}`, "rules.0.match.payment_method", both},
		{"currency", `{"rules":[{"match":{"currency":"BR"},"providers":["stripe"]}],"default":["stripe"]}`, "rules.0.match.currency", both},
		{"currency unknown", `{"rules":[{"match":{"currency":"XXQ"},"providers":["stripe"]}],"default":["stripe"]}`, "rules.0.match.currency", both},
		{"min zero", `{"rules":[{"match":{"min_amount":0},"providers":["stripe"]}],"default":["stripe"]}`, "rules.0.match.min_amount", both},
		{"min fraction", `{"rules":[{"match":{"min_amount":1.5},"providers":["stripe"]}],"default":["stripe"]}`, "rules.0.match.min_amount", both},
		{"max too large", `{"rules":[{"match":{"max_amount":100000000},"providers":["stripe"]}],"default":["stripe"]}`, "rules.0.match.max_amount", both},
		{"max string", `{"rules":[{"match":{"max_amount":"5"},"providers":["stripe"]}],"default":["stripe"]}`, "rules.0.match.max_amount", both},
		{"min above max", `{"rules":[{"match":{"min_amount":500,"max_amount":100},"providers":["stripe"]}],"default":["stripe"]}`, "rules.0.match.max_amount", both},
		{"no providers", `{"rules":[{"match":{},"providers":[]}],"default":["stripe"]}`, "rules.0.providers", both},
		{"providers missing", `{"rules":[{"match":{}}],"default":["stripe"]}`, "rules.0.providers", both},
		{"unknown provider", `{"rules":[{"match":{},"providers":["paypal"]}],"default":["stripe"]}`, "rules.0.providers.0", both},
		{"duplicate", `{"rules":[{"match":{},"providers":["stripe","mercadopago","stripe"]}],"default":["stripe"]}`, "rules.0.providers.2", both},
		{"no credentials", `{"rules":[{"match":{},"providers":["mercadopago"]}],"default":["stripe"]}`, "rules.0.providers.0", []string{"stripe"}},
		{"default missing", `{"rules":[]}`, "default", both},
		{"default empty", `{"default":[]}`, "default", both},
		{"default no credentials", `{"default":["stripe"]}`, "default.0", []string{"mercadopago"}},
		{"too many rules", many, "rules", both},
		{"unknown field", `{"default":["stripe"],"fallback":["stripe"]}`, "", both},
		{"unknown match field", `{"rules":[{"match":{"country":"BR"},"providers":["stripe"]}],"default":["stripe"]}`, "", both},
		{"null", `{"default":null}`, "", both},
		{"not json", `{"default":`, "", both},
	} {
		_, err := ParseRouting([]byte(c.body), c.have)
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != CodeInvalidRequest {
			t.Errorf("%s: err = %v, want invalid_request", c.name, err)
			continue
		}
		if c.field != "" && !slices.ContainsFunc(pe.Fields, func(f FieldError) bool { return f.Field == c.field }) {
			t.Errorf("%s: fields %+v, want one naming %s", c.name, pe.Fields, c.field)
		}
	}
}
