// Package stripe implements provider.Provider on Stripe's PaymentIntents API
// through stripe-go. It is the only place that knows Stripe's wire format and
// error shapes; callers see classified provider.Result values (CONTRACT §5).
//
// Nothing here logs secret keys, idempotency keys, payment methods or
// request and response bodies.
package stripe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/account"
	"github.com/stripe/stripe-go/v76/dispute"
	"github.com/stripe/stripe-go/v76/paymentintent"
	"github.com/stripe/stripe-go/v76/refund"

	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/reach"
)

// Config configures the Stripe adapter.
type Config struct {
	// APIBase is the API base URL; "" means Stripe's https://api.stripe.com.
	APIBase string
	// HTTPClient is used for all calls; nil means stripe-go's default. Call
	// deadlines come from the context, not from this client.
	HTTPClient *http.Client
	// MaxNetworkRetries is how often stripe-go itself re-sends a failed
	// request (same idempotency key); 0 disables it.
	MaxNetworkRetries int
	// Logger receives the adapter's own logs; nil discards them.
	Logger *slog.Logger
	// KeyRetention (PROVIDER_KEY_RETENTION) and SearchLag
	// (PROVIDER_SEARCH_GRACE) make the adapter's profile; zero takes
	// provider.StripeKeyRetention and provider.DefaultSearchLag.
	KeyRetention time.Duration
	SearchLag    time.Duration
	// Now is the service's clock, against which the provider's (the Date
	// of its answers) is read; time.Now when nil.
	Now func() time.Time
}

// Provider is the Stripe implementation of provider.Provider. It is safe for
// concurrent use.
type Provider struct {
	backend *stripego.BackendImplementation
	log     *slog.Logger
	retries int
	profile provider.Profile
	clock   *provider.Clock
}

var _ provider.Provider = (*Provider)(nil)

// New returns a Stripe provider. It does not contact Stripe.
func New(cfg Config) *Provider {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	clock := provider.NewClock(cfg.Now)
	// stripe-go's own default client, watching Stripe's clock.
	hc := http.Client{Timeout: 80 * time.Second}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	hc.Transport = reach.Dated(clock, hc.Transport)
	bc := &stripego.BackendConfig{
		HTTPClient:        &hc,
		MaxNetworkRetries: stripego.Int64(int64(cfg.MaxNetworkRetries)),
		LeveledLogger:     callLogger{l: logger, ctx: context.Background()},
	}
	if cfg.APIBase != "" {
		bc.URL = stripego.String(cfg.APIBase)
	}
	return &Provider{
		backend: stripego.GetBackendWithConfig(stripego.APIBackend, bc).(*stripego.BackendImplementation),
		log:     logger,
		retries: cfg.MaxNetworkRetries,
		clock:   clock,
		profile: provider.StripeProfile(orDefault(cfg.KeyRetention, provider.StripeKeyRetention),
			orDefault(cfg.SearchLag, provider.DefaultSearchLag)),
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Profile is Stripe's idempotency contract with the configured retention
// and search lag.
func (p *Provider) Profile() provider.Profile { return p.profile }

// Clock is Stripe's clock as its answers show it.
func (p *Provider) Clock() *provider.Clock { return p.clock }

// Retries is how often stripe-go re-sends one call on its own.
func (p *Provider) Retries() int { return p.retries }

// calls are the stripe-go resources one call uses.
type calls struct {
	PaymentIntents paymentintent.Client
	Refunds        refund.Client
	Disputes       dispute.Client
	Accounts       account.Client
}

// client returns the stripe-go resources for one call with a secret key.
// stripe-go's logger takes no context, so each call gets a copy of the
// shared backend (a few words; the HTTP client and the telemetry buffer
// stay shared) whose logger writes with the call's context: its retry
// lines name the payment, the attempt and the request like every other.
func (p *Provider) client(ctx context.Context, key string) *calls {
	b := *p.backend
	b.LeveledLogger = callLogger{l: p.log, ctx: ctx}
	return &calls{PaymentIntents: paymentintent.Client{B: &b, Key: key}, Refunds: refund.Client{B: &b, Key: key},
		Disputes: dispute.Client{B: &b, Key: key}, Accounts: account.Client{B: &b, Key: key}}
}

// Authorize creates and confirms a PaymentIntent.
func (p *Provider) Authorize(ctx context.Context, c provider.Credentials, r provider.AuthorizeRequest) provider.Result {
	if c.SecretKey == "" {
		// Nothing is sent, so nothing can have happened, also on recovery.
		return provider.Result{Answer: provider.AnswerInvalid, FailureCode: codeMissingKey, FailureMessage: "no secret key"}
	}
	params := authorizeParams(r)
	if r.CustomerID != "" {
		params.Customer = stripego.String(r.CustomerID)
	}
	if r.Description != "" {
		params.Description = stripego.String(r.Description)
	}
	params.SetIdempotencyKey(r.IdempotencyKey)
	ctx, call := reach.Trace(ctx)
	params.Context = ctx
	pi, err := p.client(ctx, c.SecretKey).PaymentIntents.New(params)
	return p.result(ctx, opAuthorize, "", pi, err, call)
}

// authorizeParams builds the create-and-confirm request. A card token is
// confirmed as it is; with a return_url 3-D Secure may redirect, without
// one redirects are refused and the frontend authenticates with the client
// secret. Pix and Boleto are created from payment_method_data, with their
// expiry and the payer's details.
func authorizeParams(r provider.AuthorizeRequest) *stripego.PaymentIntentParams {
	params := &stripego.PaymentIntentParams{
		Amount:        stripego.Int64(r.Amount),
		Currency:      stripego.String(strings.ToLower(r.Currency)),
		CaptureMethod: stripego.String(r.CaptureMethod),
		Confirm:       stripego.Bool(true),
		Metadata:      r.Metadata,
	}
	if r.ReturnURL != "" {
		params.ReturnURL = stripego.String(r.ReturnURL)
	}
	switch r.PaymentMethod {
	case provider.MethodPix, provider.MethodBoleto:
		data := &stripego.PaymentIntentPaymentMethodDataParams{Type: stripego.String(r.PaymentMethod)}
		if b := r.BillingDetails; b != nil {
			// Only what the payer gave: a Pix may carry just an email.
			data.BillingDetails = &stripego.PaymentIntentPaymentMethodDataBillingDetailsParams{
				Name: given(b.Name), Email: given(b.Email)}
			if b.Address.Line1 != "" {
				data.BillingDetails.Address = &stripego.AddressParams{
					Line1: stripego.String(b.Address.Line1), City: stripego.String(b.Address.City),
					State: stripego.String(b.Address.State), PostalCode: stripego.String(b.Address.PostalCode),
					Country: stripego.String(b.Address.Country),
				}
			}
		}
		params.PaymentMethodData = data
		params.PaymentMethodTypes = []*string{stripego.String(r.PaymentMethod)}
		opts := &stripego.PaymentIntentPaymentMethodOptionsParams{}
		if r.PaymentMethod == provider.MethodPix {
			data.Pix = &stripego.PaymentIntentPaymentMethodDataPixParams{}
			if r.ExpiresIn > 0 {
				opts.Pix = &stripego.PaymentIntentPaymentMethodOptionsPixParams{ExpiresAfterSeconds: stripego.Int64(r.ExpiresIn)}
			}
		} else {
			data.Boleto = &stripego.PaymentMethodBoletoParams{}
			if r.BillingDetails != nil {
				data.Boleto.TaxID = stripego.String(r.BillingDetails.TaxID)
			}
			if r.ExpiresIn > 0 {
				opts.Boleto = &stripego.PaymentIntentPaymentMethodOptionsBoletoParams{ExpiresAfterDays: stripego.Int64(r.ExpiresIn)}
			}
		}
		if opts.Pix != nil || opts.Boleto != nil {
			params.PaymentMethodOptions = opts
		}
	default:
		params.PaymentMethod = stripego.String(r.PaymentMethod)
		apm := &stripego.PaymentIntentAutomaticPaymentMethodsParams{Enabled: stripego.Bool(true)}
		if r.ReturnURL == "" {
			// Confirmed server side with no page to return to: Stripe would
			// demand a return_url for redirect-based methods.
			apm.AllowRedirects = stripego.String("never")
		}
		params.AutomaticPaymentMethods = apm
	}
	return params
}

// Capture captures an authorized PaymentIntent, in full when Amount is 0.
func (p *Provider) Capture(ctx context.Context, c provider.Credentials, r provider.CaptureRequest) provider.Result {
	if res, bad := precheck(c, r.IntentID); bad {
		return res
	}
	params := &stripego.PaymentIntentCaptureParams{}
	if r.Amount > 0 {
		params.AmountToCapture = stripego.Int64(r.Amount)
	}
	params.SetIdempotencyKey(r.IdempotencyKey)
	ctx, call := reach.Trace(ctx)
	params.Context = ctx
	pi, err := p.client(ctx, c.SecretKey).PaymentIntents.Capture(r.IntentID, params)
	return p.result(ctx, opCapture, r.IntentID, pi, err, call)
}

// Cancel cancels an uncaptured PaymentIntent.
func (p *Provider) Cancel(ctx context.Context, c provider.Credentials, r provider.CancelRequest) provider.Result {
	if res, bad := precheck(c, r.IntentID); bad {
		return res
	}
	params := &stripego.PaymentIntentCancelParams{}
	if r.Abandoned {
		params.CancellationReason = stripego.String(string(stripego.PaymentIntentCancellationReasonAbandoned))
	}
	params.SetIdempotencyKey(r.IdempotencyKey)
	ctx, call := reach.Trace(ctx)
	params.Context = ctx
	pi, err := p.client(ctx, c.SecretKey).PaymentIntents.Cancel(r.IntentID, params)
	return p.result(ctx, opCancel, r.IntentID, pi, err, call)
}

// Refund refunds a captured PaymentIntent, in full when Amount is 0.
func (p *Provider) Refund(ctx context.Context, c provider.Credentials, r provider.RefundRequest) provider.RefundResult {
	if res, bad := precheck(c, r.IntentID); bad {
		return provider.RefundResult{Answer: res.Answer, FailureCode: res.FailureCode, FailureMessage: res.FailureMessage}
	}
	params := &stripego.RefundParams{
		PaymentIntent: stripego.String(r.IntentID),
		Metadata:      r.Metadata,
	}
	if r.Amount > 0 {
		params.Amount = stripego.Int64(r.Amount)
	}
	params.SetIdempotencyKey(r.IdempotencyKey)
	ctx, call := reach.Trace(ctx)
	params.Context = ctx
	rf, err := p.client(ctx, c.SecretKey).Refunds.New(params)
	v := classifyCall(err, call)
	p.logVerdict(ctx, opRefund, r.IntentID, v)
	res := provider.RefundResult{Answer: v.answer, Resent: call.Resent(), FailureCode: v.code, FailureMessage: v.message, Err: v.err}
	if v.answer == provider.AnswerObject {
		res.Refund = toRefund(rf)
	}
	return res
}

// ListRefunds lists every refund of a PaymentIntent, newest first.
func (p *Provider) ListRefunds(ctx context.Context, c provider.Credentials, intentID string) ([]provider.Refund, error) {
	if err := listable(c, intentID); err != nil {
		return nil, err
	}
	params := &stripego.RefundListParams{PaymentIntent: stripego.String(intentID)}
	params.Limit = stripego.Int64(100)
	params.Context = ctx
	it := p.client(ctx, c.SecretKey).Refunds.List(params)
	return readList(it.Iter, "refunds", func() provider.Refund { return *toRefund(it.Refund()) })
}

// listable refuses to list an intent's objects without a key or an intent.
func listable(c provider.Credentials, intentID string) error {
	if c.SecretKey == "" {
		return errors.New("stripe: no secret key")
	}
	if intentID == "" {
		return provider.ErrNotFound
	}
	return nil
}

// readList reads a list to its end; a missing intent is ErrNotFound.
func readList[T any](it *stripego.Iter, what string, item func() T) ([]T, error) {
	var out []T
	for it.Next() {
		out = append(out, item())
	}
	if err := it.Err(); err != nil {
		var se *stripego.Error
		if errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound && se.Code == stripego.ErrorCodeResourceMissing {
			return nil, provider.ErrNotFound
		}
		return nil, fmt.Errorf("stripe: list %s: %w", what, loggable(err))
	}
	return out, nil
}

// RetrieveIntent fetches a PaymentIntent by id.
func (p *Provider) RetrieveIntent(ctx context.Context, c provider.Credentials, id string) (*provider.Intent, error) {
	if c.SecretKey == "" {
		return nil, errors.New("stripe: no secret key")
	}
	if id == "" {
		// An empty id would turn the GET into a list call.
		return nil, provider.ErrNotFound
	}
	params := &stripego.PaymentIntentParams{}
	params.Context = ctx
	pi, err := p.client(ctx, c.SecretKey).PaymentIntents.Get(id, params)
	if err != nil {
		var se *stripego.Error
		if errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound && se.Code == stripego.ErrorCodeResourceMissing {
			return nil, provider.ErrNotFound
		}
		return nil, fmt.Errorf("stripe: retrieve intent: %w", loggable(err))
	}
	return toIntent(pi), nil
}

// AccountID asks Stripe which account the credentials belong to (GET
// /v1/account): one id for the secret key and the restricted keys of one
// account. provider.ErrCredentialsRefused when Stripe refuses the key; any
// other error means it could not be asked.
func (p *Provider) AccountID(ctx context.Context, c provider.Credentials) (string, error) {
	if c.SecretKey == "" {
		return "", provider.ErrCredentialsRefused
	}
	params := &stripego.AccountParams{}
	params.Context = ctx
	acct := &stripego.Account{}
	if err := p.client(ctx, c.SecretKey).Accounts.B.Call(http.MethodGet, "/v1/account", c.SecretKey, params, acct); err != nil {
		var se *stripego.Error
		if errors.As(err, &se) && se.HTTPStatusCode >= 400 && se.HTTPStatusCode < 500 && se.HTTPStatusCode != http.StatusTooManyRequests {
			return "", fmt.Errorf("%w: %w", provider.ErrCredentialsRefused, loggable(err))
		}
		return "", fmt.Errorf("stripe: retrieve account: %w", loggable(err))
	}
	if acct.ID == "" {
		return "", errors.New("stripe: retrieve account: no id in the answer")
	}
	return acct.ID, nil
}

// SearchIntentByPaymentID finds the PaymentIntent whose metadata payment_id
// matches. Stripe's search index is eventually consistent (new or updated
// intents can take up to about a minute to appear), so ErrNotFound right after
// a create is not proof that no intent exists; prefer RetrieveIntent when the
// id is known. When several intents match (one per attempt), the newest wins.
func (p *Provider) SearchIntentByPaymentID(ctx context.Context, c provider.Credentials, paymentID string) (*provider.Intent, error) {
	if c.SecretKey == "" {
		return nil, errors.New("stripe: no secret key")
	}
	params := &stripego.PaymentIntentSearchParams{}
	params.Query = searchQuery(paymentID)
	params.Limit = stripego.Int64(100)
	params.Single = true // attempts per payment are few; one page is plenty
	params.Context = ctx
	it := p.client(ctx, c.SecretKey).PaymentIntents.Search(params)
	var best *stripego.PaymentIntent
	for it.Next() {
		pi := it.PaymentIntent()
		if best == nil || pi.Created > best.Created || (pi.Created == best.Created && pi.ID > best.ID) {
			best = pi
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("stripe: search intent: %w", loggable(err))
	}
	if best == nil {
		return nil, provider.ErrNotFound
	}
	return toIntent(best), nil
}

// searchQuery builds a Stripe search query matching metadata payment_id;
// backslashes and single quotes are escaped so the id stays one literal.
func searchQuery(paymentID string) string {
	esc := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(paymentID)
	return "metadata['payment_id']:'" + esc + "'"
}

// precheck rejects calls that cannot be sent; nothing reaches Stripe, so the
// outcome is a certain Failed.
func precheck(c provider.Credentials, intentID string) (provider.Result, bool) {
	switch {
	case c.SecretKey == "":
		return provider.Result{Answer: provider.AnswerInvalid, FailureCode: codeMissingKey, FailureMessage: "no secret key"}, true
	case intentID == "":
		return provider.Result{Answer: provider.AnswerInvalid, FailureCode: codeMissingIntent, FailureMessage: "no intent id"}, true
	}
	return provider.Result{}, false
}

// result classifies a PaymentIntent call.
func (p *Provider) result(ctx context.Context, o op, intentID string, pi *stripego.PaymentIntent, err error, call *reach.Call) provider.Result {
	v := classifyCall(err, call)
	p.logVerdict(ctx, o, intentID, v)
	res := provider.Result{Answer: v.answer, Resent: call.Resent(), FailureCode: v.code, FailureMessage: v.message, Err: v.err}
	switch {
	case v.answer == provider.AnswerObject:
		res.Intent = toIntent(pi)
	case v.intent != nil:
		res.Intent = toIntent(v.intent)
	}
	return res
}

func (p *Provider) logVerdict(ctx context.Context, o op, intentID string, v verdict) {
	provider.LogCall(ctx, p.log, "stripe call", string(o), intentID, v.answer, v.code, v.err)
}

func toIntent(pi *stripego.PaymentIntent) *provider.Intent {
	if pi == nil {
		return nil
	}
	md := make(map[string]string, len(pi.Metadata))
	for k, v := range pi.Metadata {
		md[k] = v
	}
	in := &provider.Intent{
		ID:               pi.ID,
		State:            intentState(pi.Status),
		Amount:           pi.Amount,
		AmountCapturable: pi.AmountCapturable,
		AmountReceived:   pi.AmountReceived,
		Currency:         strings.ToLower(string(pi.Currency)),
		CaptureMethod:    string(pi.CaptureMethod),
		Metadata:         md,
		NextAction:       nextAction(pi),
	}
	if in.State == provider.IntentRequiresAction || in.State == provider.IntentProcessing {
		in.ClientSecret = pi.ClientSecret
	}
	in.FailureCode, in.FailureMessage = lastFailure(pi.LastPaymentError)
	return in
}

// lastFailure reads a PaymentIntent's last payment error; a failed or
// abandoned 3-D Secure challenge is provider.FailureAuthentication.
func lastFailure(e *stripego.Error) (code, msg string) {
	if e == nil {
		return "", ""
	}
	switch e.Code {
	case stripego.ErrorCodePaymentIntentAuthenticationFailure:
		return provider.FailureAuthentication, e.Msg
	case stripego.ErrorCodePaymentIntentPaymentAttemptExpired:
		return provider.FailureExpired, e.Msg
	}
	if e.DeclineCode != "" {
		return string(e.DeclineCode), e.Msg
	}
	return string(e.Code), e.Msg
}

// nextAction maps a PaymentIntent's next_action onto the service's shape,
// only while the intent requires action.
func nextAction(pi *stripego.PaymentIntent) *provider.NextAction {
	na := pi.NextAction
	if na == nil || pi.Status != stripego.PaymentIntentStatusRequiresAction {
		return nil
	}
	switch {
	case na.RedirectToURL != nil:
		return &provider.NextAction{Type: provider.NextRedirectToURL,
			RedirectToURL: &provider.RedirectToURL{URL: na.RedirectToURL.URL, ReturnURL: na.RedirectToURL.ReturnURL}}
	case na.PixDisplayQRCode != nil:
		q := na.PixDisplayQRCode
		return &provider.NextAction{Type: provider.NextPixQRCode, PixQRCode: &provider.PixQRCode{
			Data: q.Data, ImageURLPNG: q.ImageURLPNG, HostedInstructionsURL: q.HostedInstructionsURL, ExpiresAt: unixRFC3339(q.ExpiresAt)}}
	case na.BoletoDisplayDetails != nil:
		b := na.BoletoDisplayDetails
		return &provider.NextAction{Type: provider.NextBoletoDetails, BoletoDetails: &provider.BoletoDetails{
			Number: b.Number, HostedVoucherURL: b.HostedVoucherURL, PDF: b.PDF, ExpiresAt: unixRFC3339(b.ExpiresAt)}}
	case na.Type == stripego.PaymentIntentNextActionTypeUseStripeSDK || na.UseStripeSDK != nil:
		return &provider.NextAction{Type: provider.NextUseStripeSDK}
	}
	return &provider.NextAction{Type: provider.NextActionUnhandled}
}

func unixRFC3339(sec int64) string {
	if sec == 0 {
		return ""
	}
	return time.Unix(sec, 0).UTC().Format(time.RFC3339)
}

// intentState maps Stripe's PaymentIntent status onto the service's terms.
func intentState(st stripego.PaymentIntentStatus) provider.IntentState {
	switch st {
	case stripego.PaymentIntentStatusRequiresCapture:
		return provider.IntentAuthorized
	case stripego.PaymentIntentStatusSucceeded:
		return provider.IntentCaptured
	case stripego.PaymentIntentStatusCanceled:
		return provider.IntentCanceled
	case stripego.PaymentIntentStatusRequiresPaymentMethod:
		return provider.IntentNeedsPaymentMethod
	case stripego.PaymentIntentStatusRequiresAction:
		return provider.IntentRequiresAction
	case stripego.PaymentIntentStatusProcessing:
		return provider.IntentProcessing
	case stripego.PaymentIntentStatusRequiresConfirmation:
		return provider.IntentRequiresConfirmation
	}
	return provider.IntentOther
}

// refundState maps Stripe's refund status onto the service's terms.
func refundState(st stripego.RefundStatus) provider.RefundState {
	switch st {
	case stripego.RefundStatusSucceeded:
		return provider.RefundSucceeded
	case stripego.RefundStatusPending, stripego.RefundStatusRequiresAction:
		return provider.RefundPending
	case stripego.RefundStatusFailed, stripego.RefundStatusCanceled:
		return provider.RefundFailed
	}
	return provider.RefundOther
}

func toRefund(rf *stripego.Refund) *provider.Refund {
	md := make(map[string]string, len(rf.Metadata))
	for k, v := range rf.Metadata {
		md[k] = v
	}
	return &provider.Refund{ID: rf.ID, State: refundState(rf.Status), Amount: rf.Amount, Metadata: md}
}

// ListDisputes lists every dispute of a PaymentIntent's charges.
func (p *Provider) ListDisputes(ctx context.Context, c provider.Credentials, intentID string) ([]provider.Dispute, error) {
	if err := listable(c, intentID); err != nil {
		return nil, err
	}
	params := &stripego.DisputeListParams{PaymentIntent: stripego.String(intentID)}
	params.Limit = stripego.Int64(100)
	params.Context = ctx
	it := p.client(ctx, c.SecretKey).Disputes.List(params)
	return readList(it.Iter, "disputes", func() provider.Dispute { return toDispute(it.Dispute()) })
}

// closedDisputes are the statuses of a settled dispute.
var closedDisputes = map[stripego.DisputeStatus]bool{
	stripego.DisputeStatusWon: true, stripego.DisputeStatusLost: true, stripego.DisputeStatusWarningClosed: true,
}

func toDispute(d *stripego.Dispute) provider.Dispute {
	out := provider.Dispute{ID: d.ID, Amount: d.Amount, Reason: string(d.Reason), Status: string(d.Status),
		Closed: closedDisputes[d.Status]}
	if d.PaymentIntent != nil {
		out.IntentID = d.PaymentIntent.ID
	}
	if d.EvidenceDetails != nil && d.EvidenceDetails.DueBy > 0 {
		out.EvidenceDueBy = time.Unix(d.EvidenceDetails.DueBy, 0).UTC()
	}
	return out
}

// given is s for a parameter, or nil to leave it out when s is empty.
func given(s string) *string {
	if s == "" {
		return nil
	}
	return stripego.String(s)
}
