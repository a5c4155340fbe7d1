package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/acmepay/payments/internal/provider"
)

// eventKinds maps the Stripe event types that can change a payment.
var eventKinds = map[string]provider.EventKind{
	"payment_intent.succeeded":                 provider.EventIntent,
	"payment_intent.amount_capturable_updated": provider.EventIntent,
	"payment_intent.canceled":                  provider.EventIntent,
	"payment_intent.payment_failed":            provider.EventIntentFailed,
	"payment_intent.processing":                provider.EventIntent,
	"payment_intent.requires_action":           provider.EventIntent,
	"charge.refunded":                          provider.EventRefunded,
	"charge.dispute.created":                   provider.EventDispute,
	"charge.dispute.updated":                   provider.EventDispute,
	"charge.dispute.closed":                    provider.EventDispute,
}

// ParseEvent verifies a Stripe-Signature with the account's webhook secret
// (stripe-go's webhook package, its default tolerance) before anything is
// read from the body, then decodes the event. Event types the service does
// not act on come back as provider.EventOther with only the id and type.
func ParseEvent(payload []byte, signature, secret string) (provider.Event, error) {
	// The event's API version is the account's webhook endpoint setting,
	// not this client's: the fields read here are stable across versions.
	ev, err := webhook.ConstructEventWithOptions(payload, signature, secret,
		webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		if errors.Is(err, webhook.ErrInvalidHeader) || errors.Is(err, webhook.ErrNoValidSignature) ||
			errors.Is(err, webhook.ErrNotSigned) || errors.Is(err, webhook.ErrTooOld) {
			return provider.Event{}, fmt.Errorf("%w: %v", provider.ErrSignature, err)
		}
		return provider.Event{}, fmt.Errorf("stripe: event: %w", err)
	}
	// stripe-go refuses a signature older than its tolerance but not one
	// dated in the future: a captured delivery re-signed ahead would stay
	// replayable for as long as it is ahead.
	if at, ok := signedAt(signature); ok && time.Until(at) > webhook.DefaultTolerance {
		return provider.Event{}, fmt.Errorf("%w: signed %s in the future", provider.ErrSignature, time.Until(at).Round(time.Second))
	}
	// Deliveries are deduplicated by event id: an event without one could
	// never be recognized when it comes again.
	if ev.ID == "" {
		return provider.Event{}, errors.New("stripe: event without an id")
	}
	n := provider.Event{EventID: ev.ID, Type: string(ev.Type), Kind: provider.EventOther}
	kind, ok := eventKinds[n.Type]
	if !ok || ev.Data == nil {
		return n, nil
	}
	n.Kind = kind
	if kind == provider.EventRefunded {
		var ch stripego.Charge
		if err := json.Unmarshal(ev.Data.Raw, &ch); err != nil {
			return n, fmt.Errorf("stripe: decode charge: %w", err)
		}
		if ch.PaymentIntent != nil {
			n.IntentID = ch.PaymentIntent.ID
		}
		n.AmountRefunded = ch.AmountRefunded
		return n, nil
	}
	if kind == provider.EventDispute {
		var d stripego.Dispute
		if err := json.Unmarshal(ev.Data.Raw, &d); err != nil {
			return n, fmt.Errorf("stripe: decode dispute: %w", err)
		}
		dp := toDispute(&d)
		n.Dispute, n.IntentID = &dp, dp.IntentID
		return n, nil
	}
	var pi stripego.PaymentIntent
	if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
		return n, fmt.Errorf("stripe: decode payment intent: %w", err)
	}
	n.Intent = toIntent(&pi)
	n.IntentID = pi.ID
	n.FailureCode, n.FailureMessage = lastFailure(pi.LastPaymentError)
	return n, nil
}

// signedAt reads the t= timestamp of a Stripe-Signature header the way
// stripe-go does (the last t= wins).
func signedAt(header string) (time.Time, bool) {
	var at time.Time
	var found bool
	for pair := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k != "t" {
			continue
		}
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		at, found = time.Unix(sec, 0), true
	}
	return at, found
}
