// Package mercadopago implements provider.Provider on Mercado Pago's
// Payments API through github.com/mercadopago/sdk-go (v1.8.0). It is the only
// place that knows Mercado Pago's wire format; callers see classified
// provider.Result values (CONTRACT §5, §15).
//
// sdk-go's own HTTP requester is replaced (see requester): every mutating
// call carries the service's derived key in X-Idempotency-Key, nothing is
// retried by the library, and every send of a call is counted.
//
// Nothing here logs access tokens, idempotency keys, card tokens or request
// and response bodies.
package mercadopago

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/mercadopago/sdk-go/pkg/config"
	"github.com/mercadopago/sdk-go/pkg/payment"
	"github.com/mercadopago/sdk-go/pkg/refund"

	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/reach"
)

// DefaultAPIBase is Mercado Pago's own API.
const DefaultAPIBase = "https://api.mercadopago.com"

// Config configures the Mercado Pago adapter.
type Config struct {
	// APIBase is MERCADOPAGO_API_BASE; "" means DefaultAPIBase.
	APIBase string
	// HTTPClient sends every request; nil means a client of its own. Call
	// deadlines come from the context.
	HTTPClient *http.Client
	// Logger receives the adapter's own logs; nil discards them.
	Logger *slog.Logger
	// Now dates Pix and Boleto expiries; nil means time.Now.
	Now func() time.Time
	// Clock reads Mercado Pago's clock from the Date of its answers
	// against the service's; nil means one against time.Now.
	Clock *provider.Clock
	// BoletoMethodID is the payment_method_id of a Boleto; "" means
	// "bolbradesco".
	BoletoMethodID string
	// KeyRetention (MERCADOPAGO_KEY_RETENTION, 0 by default: undocumented,
	// so keys are only looked up on recovery) and SearchLag
	// (MERCADOPAGO_SEARCH_GRACE; 0 means provider.DefaultSearchLag) make
	// the adapter's idempotency profile.
	KeyRetention time.Duration
	SearchLag    time.Duration
}

// Provider is the Mercado Pago implementation of provider.Provider. It is
// safe for concurrent use.
type Provider struct {
	req     *requester
	log     *slog.Logger
	now     func() time.Time
	boleto  string
	profile provider.Profile
	clock   *provider.Clock
	clients sync.Map // access token -> *sdkClients
}

// Clock is Mercado Pago's clock as its answers show it.
func (p *Provider) Clock() *provider.Clock { return p.clock }

var _ provider.Provider = (*Provider)(nil)

type sdkClients struct {
	payment payment.Client
	refund  refund.Client
}

// New returns a Mercado Pago provider. It does not contact Mercado Pago.
func New(cfg Config) (*Provider, error) {
	base := cfg.APIBase
	if base == "" {
		base = DefaultAPIBase
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("mercadopago: MERCADOPAGO_API_BASE %q is not an http(s) URL", base)
	}
	p := &Provider{
		req:    &requester{base: u, client: cfg.HTTPClient},
		log:    cfg.Logger,
		now:    cfg.Now,
		boleto: cfg.BoletoMethodID,
	}
	lag := cfg.SearchLag
	if lag <= 0 {
		lag = provider.DefaultSearchLag
	}
	p.profile = provider.MercadoPagoProfile(max(cfg.KeyRetention, 0), lag)
	p.req.resend = p.profile.KeyRetention > 0
	if p.req.client == nil {
		p.req.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	// Mercado Pago's clock, from the Date of its answers.
	p.clock = cfg.Clock
	if p.clock == nil {
		p.clock = provider.NewClock(nil)
	}
	hc := *p.req.client
	hc.Transport = reach.Dated(p.clock, hc.Transport)
	p.req.client = &hc
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.boleto == "" {
		p.boleto = "bolbradesco"
	}
	return p, nil
}

// Retries is 0: the requester never re-sends a call on its own. net/http's
// silent re-send on a broken keep-alive connection is not a retry policy
// but is counted in Result.Resent.
func (p *Provider) Retries() int { return 0 }

// Profile is Mercado Pago's idempotency profile as configured.
func (p *Provider) Profile() provider.Profile { return p.profile }

// accessToken is the one place that reads Mercado Pago's credentials.
// SecretKey carries the access token until accounts hold per-provider
// credentials.
func accessToken(c provider.Credentials) string { return c.SecretKey }

// sdk returns the sdk-go clients for an access token; all share the
// requester.
func (p *Provider) sdk(token string) *sdkClients {
	if c, ok := p.clients.Load(token); ok {
		return c.(*sdkClients)
	}
	// config.New fails only on a nil requester.
	cfg, _ := config.New(token, config.WithHTTPClient(p.req))
	c, _ := p.clients.LoadOrStore(token, &sdkClients{payment: payment.NewClient(cfg), refund: refund.NewClient(cfg)})
	return c.(*sdkClients)
}

// Authorize creates a payment: a card (held when CaptureMethod is manual),
// a Pix or a Boleto.
func (p *Provider) Authorize(ctx context.Context, c provider.Credentials, r provider.AuthorizeRequest) provider.Result {
	if res, bad := precheck(c, r.IdempotencyKey); bad {
		return res
	}
	body, set, err := p.paymentRequest(r)
	if err != nil {
		// Nothing is sent, so nothing can have happened, also on recovery.
		return provider.Result{Answer: provider.AnswerInvalid, FailureCode: codeUnsupported, FailureMessage: err.Error()}
	}
	set["capture"] = r.CaptureMethod != "manual"
	cl := &call{idemKey: r.IdempotencyKey, set: set}
	resp, err := p.sdk(accessToken(c)).payment.Create(withCall(ctx, cl), body)
	return p.result(ctx, opAuthorize, "", resp, err, cl)
}

// Capture captures an authorized payment, in full when Amount is 0.
func (p *Provider) Capture(ctx context.Context, c provider.Credentials, r provider.CaptureRequest) provider.Result {
	id, res, bad := precheckIntent(c, r.IdempotencyKey, r.IntentID)
	if bad {
		return res
	}
	cl := &call{idemKey: r.IdempotencyKey}
	pc := p.sdk(accessToken(c)).payment
	var resp *payment.Response
	var err error
	if r.Amount > 0 {
		resp, err = pc.CaptureAmount(withCall(ctx, cl), id, toMajor(r.Amount))
	} else {
		resp, err = pc.Capture(withCall(ctx, cl), id)
	}
	return p.result(ctx, opCapture, r.IntentID, resp, err, cl)
}

// Cancel cancels a payment that is not captured (authorized or pending).
func (p *Provider) Cancel(ctx context.Context, c provider.Credentials, r provider.CancelRequest) provider.Result {
	id, res, bad := precheckIntent(c, r.IdempotencyKey, r.IntentID)
	if bad {
		return res
	}
	cl := &call{idemKey: r.IdempotencyKey}
	resp, err := p.sdk(accessToken(c)).payment.Cancel(withCall(ctx, cl), id)
	return p.result(ctx, opCancel, r.IntentID, resp, err, cl)
}

// Refund refunds a captured payment, in full when Amount is 0. Mercado Pago
// keeps no metadata on refunds: r.Metadata is not sent.
func (p *Provider) Refund(ctx context.Context, c provider.Credentials, r provider.RefundRequest) provider.RefundResult {
	id, res, bad := precheckIntent(c, r.IdempotencyKey, r.IntentID)
	if bad {
		return provider.RefundResult{Answer: res.Answer, FailureCode: res.FailureCode, FailureMessage: res.FailureMessage}
	}
	cl := &call{idemKey: r.IdempotencyKey}
	rc := p.sdk(accessToken(c)).refund
	var rf *refund.Response
	var err error
	if r.Amount > 0 {
		rf, err = rc.CreatePartialRefund(withCall(ctx, cl), id, toMajor(r.Amount))
	} else {
		rf, err = rc.Create(withCall(ctx, cl), id)
	}
	v := classifyCall(err, cl)
	if v.answer == provider.AnswerObject && rf == nil {
		v = unknown(errEmptyAnswer)
	}
	p.logVerdict(ctx, opRefund, r.IntentID, v)
	out := provider.RefundResult{Answer: v.answer, Resent: cl.wire.Resent(), FailureCode: v.code, FailureMessage: v.message, Err: v.err}
	if v.answer == provider.AnswerObject {
		out.Refund = toRefund(rf)
	}
	return out
}

// errEmptyAnswer: a 2xx without the object proves nothing.
var errEmptyAnswer = errors.New("mercadopago: success without an object")

// precheck rejects calls that cannot be sent; nothing reaches Mercado Pago,
// so the outcome is a certain Failed.
func precheck(c provider.Credentials, key string) (provider.Result, bool) {
	switch {
	case accessToken(c) == "":
		return provider.Result{Answer: provider.AnswerInvalid, FailureCode: codeMissingToken, FailureMessage: "no access token"}, true
	case key == "":
		return provider.Result{Answer: provider.AnswerInvalid, FailureCode: codeMissingKey, FailureMessage: "no idempotency key"}, true
	}
	return provider.Result{}, false
}

// precheckIntent also parses the payment id, which is numeric at Mercado
// Pago.
func precheckIntent(c provider.Credentials, key, intentID string) (int, provider.Result, bool) {
	if res, bad := precheck(c, key); bad {
		return 0, res, true
	}
	id, err := strconv.Atoi(intentID)
	if err != nil || id <= 0 {
		return 0, provider.Result{Answer: provider.AnswerInvalid, FailureCode: codeMissingIntent,
			FailureMessage: "not a Mercado Pago payment id"}, true
	}
	return id, provider.Result{}, false
}

// result classifies a payment call. A created payment that Mercado Pago
// rejected is its card error answer (it answers 201 with status rejected).
func (p *Provider) result(ctx context.Context, o op, intentID string, resp *payment.Response, err error, cl *call) provider.Result {
	v := classifyCall(err, cl)
	if v.answer == provider.AnswerObject && (resp == nil || resp.ID == 0) {
		v = unknown(errEmptyAnswer)
	}
	var in *provider.Intent
	if v.answer == provider.AnswerObject {
		in = toIntent(resp)
		if o == opAuthorize && resp.Status == statusRejected {
			v = verdict{answer: provider.AnswerCardError, code: in.FailureCode, message: in.FailureMessage}
		}
	}
	p.logVerdict(ctx, o, intentID, v)
	return provider.Result{Answer: v.answer, Resent: cl.wire.Resent(), Intent: in,
		FailureCode: v.code, FailureMessage: v.message, Err: v.err}
}

func (p *Provider) logVerdict(ctx context.Context, o op, intentID string, v verdict) {
	provider.LogCall(ctx, p.log, "mercadopago call", string(o), intentID, v.answer, v.code, v.err)
}
