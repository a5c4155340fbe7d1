package chaos

import (
	"sort"
	"strconv"
	"strings"

	"github.com/acmepay/payments/internal/provider/providersim"
)

// Provider names, as the service and its database spell them.
const (
	provStripe = "stripe"
	provMP     = "mercadopago"
)

// providers is the order in which the report lists them.
var providers = []string{provStripe, provMP}

// record is one payment object at a provider, in the terms of a Stripe
// PaymentIntent, so that every check reads both providers alike: its
// Metadata carries order_id, payment_id and attempt.
type record struct {
	providersim.Intent
	Provider string
}

// stripeRecords are the simulator's PaymentIntents.
func stripeRecords(intents []providersim.Intent) []record {
	out := make([]record, 0, len(intents))
	for _, in := range intents {
		out = append(out, record{Intent: in, Provider: provStripe})
	}
	return out
}

// mpRecords are the simulator's Mercado Pago payments as records. The
// order is the prefix of the key that created the payment
// ({order_id}:autorizar-v{n}); the payment and attempt are its
// external_reference ({payment_id}:{attempt}). Statuses map onto an
// intent's: authorized is held (requires_capture), approved and refunded
// charged (succeeded), rejected declined, pending waits for the customer
// (requires_action), cancelled released; a card cancelled by the seller
// had been authorized (its card stays attached, as a canceled intent's
// does after a hold).
func mpRecords(payments []providersim.MPPayment) []record {
	out := make([]record, 0, len(payments))
	for _, p := range payments {
		order, _, _ := strings.Cut(p.IdempotencyKey, ":")
		pid, attempt := p.ExternalReference, ""
		if i := strings.LastIndex(pid, ":"); i > 0 {
			pid, attempt = pid[:i], pid[i+1:]
		}
		in := providersim.Intent{ID: strconv.FormatInt(p.ID, 10), Amount: p.Amount, Currency: "brl",
			IdempotencyKey: p.IdempotencyKey, Created: p.Created, MethodType: p.PaymentTypeID,
			Metadata: map[string]string{"order_id": order, "payment_id": pid, "attempt": attempt}}
		switch p.Status {
		case "authorized":
			in.Status, in.PaymentMethod, in.AmountCapturable = "requires_capture", p.PaymentMethodID, p.Amount
		case "approved", "refunded":
			in.Status, in.PaymentMethod, in.AmountReceived, in.AmountRefunded = "succeeded", p.PaymentMethodID, p.Amount, p.Refunded
			in.LatestCharge = in.ID
		case "rejected":
			in.Status, in.LatestCharge = "requires_payment_method", in.ID
		case "pending", "in_process":
			in.Status = "requires_action"
		case "cancelled":
			in.Status = "canceled"
			if p.PaymentTypeID == "credit_card" && p.StatusDetail == "by_collector" {
				in.PaymentMethod = p.PaymentMethodID
			}
		default:
			in.Status = p.Status
		}
		out = append(out, record{Intent: in, Provider: provMP})
	}
	return out
}

// reqProvider is the provider a logged request went to.
func reqProvider(q providersim.Request) string {
	if strings.HasPrefix(q.Op, "mp_") {
		return provMP
	}
	return provStripe
}

// providerFigures are one provider's share of the invariants and of the
// traffic.
type providerFigures struct {
	DoubleCharges, LostPayments, Phantoms, AmountMismatches, Lies, Stranded, LateResends, FalseNoEffect int
	Records, Authorized, Payments, Captured, Refunds, Lookups, KeysResent, Faults                       int
}

func (f *providerFigures) violations() int {
	return f.DoubleCharges + f.LostPayments + f.Phantoms + f.AmountMismatches + f.Lies + f.Stranded + f.LateResends + f.FalseNoEffect
}

// of returns a provider's figures, creating them.
func (r *Report) of(prov string) *providerFigures {
	if prov == "" {
		prov = provStripe
	}
	if r.ByProvider == nil {
		r.ByProvider = map[string]*providerFigures{}
	}
	f := r.ByProvider[prov]
	if f == nil {
		f = &providerFigures{}
		r.ByProvider[prov] = f
	}
	return f
}

// ProviderPayments is the number of local payments at a provider.
func (r *Report) ProviderPayments(prov string) int { return r.of(prov).Payments }

// providerLines prints each provider's line of the report.
func (r *Report) providerLines(line func(name, format string, args ...any)) {
	names := append([]string(nil), providers...)
	for p := range r.ByProvider {
		if p != provStripe && p != provMP {
			names = append(names, p)
		}
	}
	sort.Strings(names[2:])
	for _, p := range names {
		f := r.of(p)
		line(p, "%d violations (double charges %d, lost %d, lies %d, stranded %d, phantoms %d, amount mismatches %d, late re-sends %d, false no-effect %d); "+
			"%d payments (captured %d, refunds %d), %d objects at the provider (authorized %d), %d attempts settled by a lookup, %d keys sent more than once, %d faults injected",
			f.violations(), f.DoubleCharges, f.LostPayments, f.Lies, f.Stranded, f.Phantoms, f.AmountMismatches, f.LateResends, f.FalseNoEffect,
			f.Payments, f.Captured, f.Refunds, f.Records, f.Authorized, f.Lookups, f.KeysResent, f.Faults)
	}
}

// provName is how a sample names a provider's object.
func provName(prov string) string {
	if prov == provMP {
		return "Mercado Pago payment"
	}
	return "intent"
}
