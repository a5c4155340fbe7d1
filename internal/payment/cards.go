package payment

import (
	"fmt"
	"regexp"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/acmepay/payments/internal/provider"
)

// MethodCard is the payment method of a create that names its card per
// provider (payment_methods) rather than one token.
const MethodCard = "card"

// Installments of a Mercado Pago card (CONTRACT §15).
const (
	MinInstallments = 1
	MaxInstallments = 24
)

// mpBrandPattern bounds Mercado Pago's payment_method_id (visa, master,
// amex, elo, debvisa, …).
var mpBrandPattern = regexp.MustCompile(`^[a-z0-9_]{1,40}$`)

// PaymentMethods names the card at each provider; each entry is optional,
// and a provider whose entry is missing is never tried.
type PaymentMethods struct {
	Stripe      string                    `json:"stripe,omitempty"`
	MercadoPago *provider.MercadoPagoCard `json:"mercadopago,omitempty"`
}

type methodsBody struct {
	Stripe      *string     `json:"stripe"`
	MercadoPago *mpCardBody `json:"mercadopago"`
}

type mpCardBody struct {
	Token           *string        `json:"token"`
	PaymentMethodID *string        `json:"payment_method_id"`
	Installments    jsontext.Value `json:"installments"`
}

// parsePaymentMethods validates payment_methods; installments default to 1
// so that leaving them out and sending 1 is the same request.
func parsePaymentMethods(b *methodsBody, bad func(field, msg string)) *PaymentMethods {
	out := &PaymentMethods{}
	if b.Stripe == nil && b.MercadoPago == nil {
		bad("payment_methods", "must name a card at one provider at least (stripe, mercadopago)")
		return out
	}
	if b.Stripe != nil {
		out.Stripe = parseToken("payment_methods.stripe", *b.Stripe, bad)
	}
	if m := b.MercadoPago; m != nil {
		card := &provider.MercadoPagoCard{Installments: MinInstallments}
		if m.Token == nil {
			bad("payment_methods.mercadopago.token", "is required")
		} else {
			card.Token = parseToken("payment_methods.mercadopago.token", *m.Token, bad)
		}
		switch {
		case m.PaymentMethodID == nil:
			bad("payment_methods.mercadopago.payment_method_id", "is required")
		case !mpBrandPattern.MatchString(*m.PaymentMethodID):
			bad("payment_methods.mercadopago.payment_method_id", "must match ^[a-z0-9_]{1,40}$ (the brand Mercado Pago reports: visa, master, …)")
		default:
			card.PaymentMethodID = *m.PaymentMethodID
		}
		if len(m.Installments) > 0 {
			n, ok := ParseAmount(m.Installments)
			if !ok || n < MinInstallments || n > MaxInstallments {
				bad("payment_methods.mercadopago.installments", fmt.Sprintf("must be an integer from %d to %d", MinInstallments, MaxInstallments))
			} else {
				card.Installments = int(n)
			}
		}
		out.MercadoPago = card
	}
	return out
}

// parseToken checks a provider token; card data is refused and never
// echoed.
func parseToken(field, v string, bad func(field, msg string)) string {
	switch {
	case ContainsCardNumber(v):
		bad(field, "looks like a card number; send a provider token, never card data")
	case !paymentMethodPattern.MatchString(v):
		bad(field, "must be a provider token matching ^[A-Za-z0-9_]{1,255}$")
	default:
		return v
	}
	return ""
}

// cardFor is what an authorization at a provider sends for the payment's
// method: the token of that provider's entry when the create named one
// per provider, else the payment's own token (or pix, boleto).
func cardFor(p *Payment, name string) (token string, mp *provider.MercadoPagoCard) {
	m := p.Options.Methods
	if m == nil {
		return p.PaymentMethod, nil
	}
	if ProviderOf(name) == ProviderMercadoPago {
		return MethodCard, m.MercadoPago
	}
	return m.Stripe, nil
}

// Method is the create's payment method: pix, boleto, card for
// payment_methods, or the card token itself.
func (r CreateRequest) Method() string {
	if r.PaymentMethods != nil {
		return MethodCard
	}
	return r.PaymentMethod
}
