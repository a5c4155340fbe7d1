package stripe

import (
	"context"
	"errors"
	"fmt"
	"time"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/acmepay/payments/internal/provider"
)

var _ provider.Lister = (*Provider)(nil)

// ListedBy is creation: Stripe lists PaymentIntents by created only.
func (p *Provider) ListedBy() provider.ListedBy { return provider.ListedByCreated }

// ListLag is 0: Stripe's lists, unlike its search, show every write at
// once.
func (p *Provider) ListLag() time.Duration { return 0 }

// ListIntents reads one page of the PaymentIntents created in [q.From,
// q.To) (GET /v1/payment_intents?created[gte]=…&created[lt]=…), newest
// first, with each latest charge expanded: its amount_refunded counts the
// succeeded and pending refunds (a failed refund is given back to it), and
// its disputed flag says whether the disputes need to be listed. Unlike
// search, Stripe's lists are not eventually consistent.
func (p *Provider) ListIntents(ctx context.Context, c provider.Credentials, q provider.ListQuery) (provider.ListPage, error) {
	if c.SecretKey == "" {
		return provider.ListPage{}, errors.New("stripe: no secret key")
	}
	params := &stripego.PaymentIntentListParams{CreatedRange: &stripego.RangeQueryParams{
		GreaterThanOrEqual: q.From.Unix(), LesserThan: q.To.Unix()}}
	params.Limit = stripego.Int64(int64(min(max(q.Limit, 1), 100)))
	params.StartingAfter = given(q.Cursor)
	params.Single = true // one page per call, so the caller paces the calls
	params.AddExpand("data.latest_charge")
	params.Context = ctx
	it := p.client(ctx, c.SecretKey).PaymentIntents.List(params)
	var page provider.ListPage
	for it.Next() {
		page.Intents = append(page.Intents, listed(it.PaymentIntent()))
	}
	if err := it.Err(); err != nil {
		return provider.ListPage{}, fmt.Errorf("stripe: list intents: %w", loggable(err))
	}
	if l := it.PaymentIntentList(); l != nil && l.HasMore && len(page.Intents) > 0 {
		page.Next = page.Intents[len(page.Intents)-1].Intent.ID
	}
	return page, nil
}

func listed(pi *stripego.PaymentIntent) provider.Listed {
	l := provider.Listed{Intent: *toIntent(pi), PaymentID: pi.Metadata["payment_id"]}
	if ch := pi.LatestCharge; ch != nil {
		l.Refunded, l.Disputed = ch.AmountRefunded, ch.Disputed
	}
	return l
}
