// Package webhook turns a provider's signed event into a payment.Notice:
// the Stripe-Signature is verified with the account's webhook secret
// (stripe-go's webhook package, its default tolerance) before anything is
// read from the body.
package webhook

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"
)

// ErrSignature means the event was not signed with the account's secret, or
// its timestamp is outside the tolerance.
var ErrSignature = errors.New("webhook: invalid signature")

// Handled lists the event types that can change a payment.
var Handled = map[string]bool{
	"payment_intent.succeeded":                 true,
	"payment_intent.amount_capturable_updated": true,
	"payment_intent.payment_failed":            true,
	"payment_intent.canceled":                  true,
	"charge.refunded":                          true,
}

// Parse verifies and decodes an event. Event types the service does not act
// on come back with a Notice carrying only the event id and type.
func Parse(payload []byte, signature, secret string) (payment.Notice, error) {
	// The event's API version is the account's webhook endpoint setting,
	// not this client's: the fields read here are stable across versions.
	ev, err := webhook.ConstructEventWithOptions(payload, signature, secret,
		webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil {
		if errors.Is(err, webhook.ErrInvalidHeader) || errors.Is(err, webhook.ErrNoValidSignature) ||
			errors.Is(err, webhook.ErrNotSigned) || errors.Is(err, webhook.ErrTooOld) {
			return payment.Notice{}, fmt.Errorf("%w: %v", ErrSignature, err)
		}
		return payment.Notice{}, fmt.Errorf("webhook: %w", err)
	}
	n := payment.Notice{EventID: ev.ID, Type: string(ev.Type)}
	if !Handled[n.Type] || ev.Data == nil {
		return n, nil
	}
	if n.Type == "charge.refunded" {
		var ch stripego.Charge
		if err := json.Unmarshal(ev.Data.Raw, &ch); err != nil {
			return n, fmt.Errorf("webhook: decode charge: %w", err)
		}
		if ch.PaymentIntent != nil {
			n.IntentID = ch.PaymentIntent.ID
		}
		n.AmountRefunded = ch.AmountRefunded
		return n, nil
	}
	var pi stripego.PaymentIntent
	if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
		return n, fmt.Errorf("webhook: decode payment intent: %w", err)
	}
	n.Intent = &provider.Intent{
		ID: pi.ID, Status: string(pi.Status), Amount: pi.Amount, AmountCapturable: pi.AmountCapturable,
		AmountReceived: pi.AmountReceived, Currency: string(pi.Currency), CaptureMethod: string(pi.CaptureMethod),
		Metadata: pi.Metadata,
	}
	n.IntentID = pi.ID
	if e := pi.LastPaymentError; e != nil {
		n.FailureCode, n.FailureMessage = string(e.DeclineCode), e.Msg
		if n.FailureCode == "" {
			n.FailureCode = string(e.Code)
		}
	}
	return n, nil
}
