package mercadopago

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mercadopago/sdk-go/pkg/payment"

	"github.com/acmepay/payments/internal/provider"
)

var _ provider.Lister = (*Provider)(nil)

// ListedBy is the last change: Mercado Pago's search ranges over
// date_last_updated, so a payment made long ago and refunded or charged
// back lately is listed with the change.
func (p *Provider) ListedBy() provider.ListedBy { return provider.ListedByUpdated }

// ListLag is the search's lag (MERCADOPAGO_SEARCH_GRACE): the list is a
// search, as eventually consistent as any.
func (p *Provider) ListLag() time.Duration { return p.Profile().SearchLag }

// ListIntents reads one page of the payments last updated in [q.From,
// q.To) (GET /v1/payments/search?range=date_last_updated&begin_date=…
// &end_date=…&sort=date_created&criteria=asc&limit=…&offset=…); the cursor
// is the next offset. Each result carries its refunds; a chargeback shows
// as the status charged_back (or in_mediation for a claim), whose details
// need ListDisputes. Offsets over a changing set can skip a payment that
// moved out of the range while paging: the caller looks up any payment
// the list did not return.
func (p *Provider) ListIntents(ctx context.Context, c provider.Credentials, q provider.ListQuery) (provider.ListPage, error) {
	if accessToken(c) == "" {
		return provider.ListPage{}, errNoToken
	}
	offset := 0
	if q.Cursor != "" {
		n, err := strconv.Atoi(q.Cursor)
		if err != nil || n < 0 {
			return provider.ListPage{}, fmt.Errorf("mercadopago: list payments: bad cursor %q", q.Cursor)
		}
		offset = n
	}
	limit := min(max(q.Limit, 1), 100)
	resp, err := p.sdk(accessToken(c)).payment.Search(ctx, payment.SearchRequest{Limit: limit, Offset: offset,
		Filters: map[string]string{"range": "date_last_updated", "begin_date": mpDate(q.From),
			// end_date is inclusive at Mercado Pago: stop a millisecond short.
			"end_date": mpDate(q.To.Add(-time.Millisecond)), "sort": "date_created", "criteria": "asc"}})
	if err != nil {
		return provider.ListPage{}, fmt.Errorf("mercadopago: list payments: %w", loggable(err))
	}
	if resp == nil {
		return provider.ListPage{}, fmt.Errorf("mercadopago: list payments: %w", errEmptyAnswer)
	}
	var page provider.ListPage
	for i := range resp.Results {
		page.Intents = append(page.Intents, listedPayment(&resp.Results[i]))
	}
	if next := offset + len(resp.Results); len(resp.Results) > 0 && next < resp.Paging.Total {
		page.Next = strconv.Itoa(next)
	}
	return page, nil
}

func mpDate(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func listedPayment(r *payment.Response) provider.Listed {
	l := provider.Listed{Intent: *toIntent(r),
		Disputed: r.Status == statusChargedBack || r.Status == statusInMediation}
	if i := strings.LastIndex(r.ExternalReference, ":"); i > 0 {
		if n, err := strconv.Atoi(r.ExternalReference[i+1:]); err == nil && n > 0 {
			l.PaymentID, l.Attempt = r.ExternalReference[:i], n
		}
	}
	for _, rf := range r.Refunds {
		if st := refundState(rf.Status); st == provider.RefundSucceeded || st == provider.RefundPending {
			l.Refunded += toMinor(rf.Amount)
		}
	}
	return l
}
