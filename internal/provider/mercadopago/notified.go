package mercadopago

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mercadopago/sdk-go/pkg/payment"

	"github.com/acmepay/payments/internal/provider"
)

// The notification topics the service reads. A chargebacks notification
// names a chargeback (GET /v1/chargebacks/{id}); the configuration screen
// calls the topic "chargebacks" and notifications carry
// "topic_chargebacks_wh", so both are read.
const (
	TopicPayment           = "payment"
	TopicChargebacks       = "topic_chargebacks_wh"
	topicChargebacksScreen = "chargebacks"
)

var _ provider.Notified = (*Provider)(nil)

// ReadsTopic reports whether NotifiedEvents reads a topic's notifications;
// any other is only received.
func ReadsTopic(topic string) bool {
	return topic == TopicPayment || topic == TopicChargebacks || topic == topicChargebacksScreen
}

// NotifiedEvents reads what a notification's object shows now, never the
// notification's body. A payment yields its state (as an intent), its
// refunded total when money was refunded, and, when it is charged back or
// in mediation, its chargebacks. A chargeback yields the same of each of
// its payments, with the chargeback as retrieved. An object Mercado Pago
// does not have is an ignored event. Event ids name what was read, so
// every notification that reads the same thing is one delivery and a later
// change (a second partial refund, a decided chargeback) is a new one.
func (p *Provider) NotifiedEvents(ctx context.Context, c provider.Credentials, topic, action, id string) ([]provider.Event, error) {
	if action == "" {
		action = topic
	}
	if topic == TopicPayment {
		evs, err := p.paymentEvents(ctx, c, action, id, nil)
		if errors.Is(err, provider.ErrNotFound) {
			return []provider.Event{{EventID: "mp:" + id + ":not_found", Type: action, Kind: provider.EventOther}}, nil
		}
		return evs, err
	}
	if !ReadsTopic(topic) {
		return nil, fmt.Errorf("mercadopago: notifications of topic %q are not read", topic)
	}
	cb, err := p.getChargeback(ctx, c, id)
	if errors.Is(err, provider.ErrNotFound) {
		return []provider.Event{{EventID: "mp:chargeback:" + id + ":not_found", Type: action, Kind: provider.EventOther}}, nil
	}
	if err != nil {
		return nil, err
	}
	var out []provider.Event
	for _, raw := range cb.Payments {
		pid := strings.Trim(string(raw), `"`)
		evs, err := p.paymentEvents(ctx, c, action, pid, &cb)
		if errors.Is(err, provider.ErrNotFound) {
			continue // a payment of another seller, or gone: nothing of ours
		}
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	if len(out) == 0 {
		return []provider.Event{{EventID: "mp:chargeback:" + id + ":no_payment", Type: action, Kind: provider.EventOther}}, nil
	}
	return out, nil
}

// paymentEvents retrieves a payment and reads it as events: its state, its
// refunded total, and its chargebacks (cb, when a chargeback notification
// brought it, else a search when the payment shows one).
func (p *Provider) paymentEvents(ctx context.Context, c provider.Credentials, action, id string, cb *chargeback) ([]provider.Event, error) {
	resp, err := p.retrieve(ctx, c, id)
	if err != nil {
		return nil, err
	}
	in := toIntent(resp)
	n := provider.Event{EventID: "mp:" + in.ID + ":" + string(in.State) + ":" + in.FailureCode, Type: action, Kind: provider.EventIntent,
		Intent: in, IntentID: in.ID}
	if in.State == provider.IntentNeedsPaymentMethod && in.FailureCode != "" {
		n.Kind, n.FailureCode, n.FailureMessage = provider.EventIntentFailed, in.FailureCode, in.FailureMessage
	}
	out := []provider.Event{n}
	if refunded := amountRefunded(resp); refunded > 0 {
		out = append(out, provider.Event{EventID: "mp:" + in.ID + ":refunded:" + strconv.FormatInt(refunded, 10), Type: action,
			Kind: provider.EventRefunded, IntentID: in.ID, AmountRefunded: refunded})
	}
	var ds []provider.Dispute
	switch {
	case cb != nil:
		ds = []provider.Dispute{cb.dispute(in.ID)}
	case resp.Status == statusChargedBack || resp.Status == statusInMediation:
		if ds, err = p.ListDisputes(ctx, c, in.ID); err != nil {
			return nil, err
		}
	}
	for i := range ds {
		d := ds[i]
		out = append(out, provider.Event{EventID: disputeEventID(d), Type: action, Kind: provider.EventDispute, IntentID: in.ID, Dispute: &d})
	}
	return out, nil
}

// disputeEventID names what a chargeback shows: its status and deadline.
func disputeEventID(d provider.Dispute) string {
	id := "mp:chargeback:" + d.ID + ":" + d.Status
	if !d.EvidenceDueBy.IsZero() {
		id += ":" + strconv.FormatInt(d.EvidenceDueBy.Unix(), 10)
	}
	return id
}

// amountRefunded is what a payment shows refunded: transaction_amount_refunded,
// or the whole amount of a refunded payment that does not say.
func amountRefunded(r *payment.Response) int64 {
	refunded := toMinor(r.TransactionAmountRefunded)
	if refunded == 0 && r.Status == statusRefunded {
		refunded = toMinor(r.TransactionAmount)
	}
	return refunded
}

// retrieve is GET /v1/payments/{id}.
func (p *Provider) retrieve(ctx context.Context, c provider.Credentials, id string) (*payment.Response, error) {
	if accessToken(c) == "" {
		return nil, errNoToken
	}
	n, ok := paymentID(id)
	if !ok {
		return nil, provider.ErrNotFound
	}
	resp, err := p.sdk(accessToken(c)).payment.Get(ctx, n)
	if err != nil {
		return nil, lookupErr("retrieve payment", err)
	}
	if resp == nil || resp.ID == 0 {
		return nil, fmt.Errorf("mercadopago: retrieve payment: %w", errEmptyAnswer)
	}
	return resp, nil
}

// getChargeback is GET /v1/chargebacks/{id}; sdk-go v1.8.0 has no
// chargebacks client.
func (p *Provider) getChargeback(ctx context.Context, c provider.Credentials, id string) (chargeback, error) {
	var cb chargeback
	if accessToken(c) == "" {
		return cb, errNoToken
	}
	if id == "" || strings.ContainsAny(id, "/?#") {
		return cb, provider.ErrNotFound
	}
	if err := p.getChargebackJSON(ctx, c, "/v1/chargebacks/"+url.PathEscape(id), &cb); err != nil {
		return cb, lookupErr("retrieve chargeback", err)
	}
	return cb, nil
}

// getChargebackJSON sends an authenticated GET of a chargebacks path.
func (p *Provider) getChargebackJSON(ctx context.Context, c provider.Credentials, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+sdkHost+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+accessToken(c))
	req.Header.Set("Accept", "application/json")
	return p.getJSON(req, v)
}
