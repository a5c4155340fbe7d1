package mercadopago

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mercadopago/sdk-go/pkg/mperror"
	"github.com/mercadopago/sdk-go/pkg/payment"

	"github.com/acmepay/payments/internal/provider"
)

// errNoToken: a lookup without credentials cannot be asked.
var errNoToken = errors.New("mercadopago: no access token")

// ErrAttemptNeeded: a search was asked for a payment id without its
// attempt. external_reference is "{payment_id}:{attempt}" and Mercado Pago
// matches it whole, so finding nothing for the bare id would prove
// nothing; it is never ErrNotFound.
var ErrAttemptNeeded = errors.New("mercadopago: search needs the attempt (payment_id:attempt)")

// lookupErr maps a lookup's error: a 404 is ErrNotFound, anything else
// means Mercado Pago could not be asked.
func lookupErr(what string, err error) error {
	var re *mperror.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return provider.ErrNotFound
	}
	return fmt.Errorf("mercadopago: %s: %w", what, loggable(err))
}

// paymentID parses a Mercado Pago payment id; anything else names no
// payment there.
func paymentID(s string) (int, bool) {
	id, err := strconv.Atoi(s)
	return id, err == nil && id > 0
}

// RetrieveIntent fetches a payment by id (GET /v1/payments/{id}).
func (p *Provider) RetrieveIntent(ctx context.Context, c provider.Credentials, id string) (*provider.Intent, error) {
	resp, err := p.retrieve(ctx, c, id)
	if err != nil {
		return nil, err
	}
	return toIntent(resp), nil
}

// SearchIntentByPaymentID finds the payment of one attempt. ref must be
// "{payment_id}:{attempt}", the external_reference Authorize sets; a bare
// payment id is ErrAttemptNeeded (see SearchIntentByAttempt).
func (p *Provider) SearchIntentByPaymentID(ctx context.Context, c provider.Credentials, ref string) (*provider.Intent, error) {
	i := strings.LastIndex(ref, ":")
	if i <= 0 {
		return nil, ErrAttemptNeeded
	}
	attempt, err := strconv.Atoi(ref[i+1:])
	if err != nil || attempt <= 0 {
		return nil, ErrAttemptNeeded
	}
	return p.SearchIntentByAttempt(ctx, c, ref[:i], attempt)
}

// SearchIntentByAttempt finds the payment an attempt created (GET
// /v1/payments/search?external_reference=…). Mercado Pago's search is
// eventually consistent: ErrNotFound proves nothing until
// MERCADOPAGO_SEARCH_GRACE has passed. Should one attempt have made several
// payments, the newest wins.
func (p *Provider) SearchIntentByAttempt(ctx context.Context, c provider.Credentials, paymentID string, attempt int) (*provider.Intent, error) {
	if accessToken(c) == "" {
		return nil, errNoToken
	}
	ref := paymentID + ":" + strconv.Itoa(attempt)
	resp, err := p.sdk(accessToken(c)).payment.Search(ctx, payment.SearchRequest{
		Limit:   30,
		Filters: map[string]string{"external_reference": ref, "sort": "date_created", "criteria": "desc"},
	})
	if err != nil {
		return nil, fmt.Errorf("mercadopago: search payments: %w", loggable(err))
	}
	if resp == nil {
		return nil, fmt.Errorf("mercadopago: search payments: %w", errEmptyAnswer)
	}
	var best *payment.Response
	for i := range resp.Results {
		r := &resp.Results[i]
		if r.ExternalReference != ref {
			continue // the search is not documented to match exactly
		}
		if best == nil || r.DateCreated.After(best.DateCreated) || (r.DateCreated.Equal(best.DateCreated) && r.ID > best.ID) {
			best = r
		}
	}
	if best == nil {
		return nil, provider.ErrNotFound
	}
	return toIntent(best), nil
}

// ListRefunds lists every refund of a payment (GET
// /v1/payments/{id}/refunds). Their Metadata is empty: Mercado Pago keeps
// none on refunds.
func (p *Provider) ListRefunds(ctx context.Context, c provider.Credentials, intentID string) ([]provider.Refund, error) {
	if accessToken(c) == "" {
		return nil, errNoToken
	}
	n, ok := paymentID(intentID)
	if !ok {
		return nil, provider.ErrNotFound
	}
	list, err := p.sdk(accessToken(c)).refund.List(ctx, n)
	if err != nil {
		return nil, lookupErr("list refunds", err)
	}
	out := make([]provider.Refund, 0, len(list))
	for i := range list {
		out = append(out, *toRefund(&list[i]))
	}
	return out, nil
}

// ListDisputes lists a payment's chargebacks (GET
// /v1/chargebacks/search?payment_id=…). sdk-go v1.8.0 has no chargebacks
// client, so the call goes through the requester directly.
func (p *Provider) ListDisputes(ctx context.Context, c provider.Credentials, intentID string) ([]provider.Dispute, error) {
	if accessToken(c) == "" {
		return nil, errNoToken
	}
	if _, ok := paymentID(intentID); !ok {
		return nil, provider.ErrNotFound
	}
	var page chargebackPage
	if err := p.getChargebackJSON(ctx, c, "/v1/chargebacks/search?payment_id="+url.QueryEscape(intentID), &page); err != nil {
		return nil, lookupErr("search chargebacks", err)
	}
	out := make([]provider.Dispute, 0, len(page.Results))
	for _, cb := range page.Results {
		out = append(out, cb.dispute(intentID))
	}
	return out, nil
}

// getJSON sends a GET and decodes its JSON answer; an error status is an
// *mperror.ResponseError, as the SDK's own calls return.
func (p *Provider) getJSON(req *http.Request, v any) error {
	resp, err := p.req.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode > 399 {
		return &mperror.ResponseError{StatusCode: resp.StatusCode, Message: string(body), Headers: resp.Header}
	}
	return json.Unmarshal(body, v)
}

// chargebackPage is a page of Mercado Pago's chargeback search.
type chargebackPage struct {
	Results []chargeback `json:"results"`
}

// chargeback is the part of a Mercado Pago chargeback the service reads.
// coverage_applied is null until it is decided: true in the seller's
// favour, false against.
type chargeback struct {
	ID                    json.RawMessage   `json:"id"`       // a string or a number
	Payments              []json.RawMessage `json:"payments"` // ids, numbers or strings
	Amount                float64           `json:"amount"`
	Reason                string            `json:"reason"`
	CoverageApplied       *bool             `json:"coverage_applied"`
	DocumentationRequired bool              `json:"documentation_required"`
	DocumentationStatus   string            `json:"documentation_status"`
	DocumentationDeadline *time.Time        `json:"date_documentation_deadline"`
}

func (cb chargeback) dispute(intentID string) provider.Dispute {
	d := provider.Dispute{ID: strings.Trim(string(cb.ID), `"`), IntentID: intentID, Amount: toMinor(cb.Amount), Reason: cb.Reason,
		Status: cb.DocumentationStatus}
	if cb.CoverageApplied != nil {
		d.Closed, d.Status = true, "lost"
		if *cb.CoverageApplied {
			d.Status = "won"
		}
	}
	if !d.Closed && cb.DocumentationRequired && cb.DocumentationDeadline != nil {
		d.EvidenceDueBy = cb.DocumentationDeadline.UTC()
	}
	return d
}
