package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/provider"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Outcome is a classified provider answer for any operation.
type Outcome struct {
	provider.Result
	Refund *provider.Refund
}

// Bounds of the re-send window (CONTRACT §5) that the provider's own
// retries add to PROVIDER_TIMEOUT.
const (
	// retryBackoffMax is the longest pause a client library takes between
	// two sends of one call (stripe-go's is 5 s).
	retryBackoffMax = 5 * time.Second
	// clockSkew covers the difference between this clock and the
	// provider's.
	clockSkew = time.Minute
)

// resendMargin is how long before the provider forgets a key the service
// stops re-sending it: every send of one call (the library's retries, each
// of which net/http may silently re-send once on a broken reused
// connection) at PROVIDER_TIMEOUT, their backoff, and clock skew.
func resendMargin(timeout time.Duration, retries int) time.Duration {
	return timeout*time.Duration(2*(1+retries)) + time.Duration(retries)*retryBackoffMax + clockSkew
}

// resendUntil is the instant after which an attempt's provider key is
// never sent again: past it only lookups may learn the outcome. ok is false
// when the provider keeps no key (its profile's KeyRetention is zero): then
// a key is sent once and never again.
func (s *Service) resendUntil(prov provider.Provider, a *Attempt) (until time.Time, ok bool) {
	prof := prov.Profile()
	margin := resendMargin(s.providerTimeout, prov.Retries())
	return a.CreatedAt.Add(prof.KeyRetention - margin), prof.KeyRetention > 0
}

// Profile is Stripe's idempotency contract, by which its answers are
// judged.
func (s *Service) Profile() provider.Profile { return s.providers[ProviderStripe].Profile() }

// ProfileOf is a provider's idempotency profile; Stripe's for a name the
// service has no adapter for.
func (s *Service) ProfileOf(name string) provider.Profile {
	if p, ok := s.providers[ProviderOf(name)]; ok {
		return p.Profile()
	}
	return s.Profile()
}

// ErrNoProvider: the service has no adapter for a payment's provider, or
// the account no credentials there.
var ErrNoProvider = errors.New("payment: provider not configured")

// Bound is one provider with an account's credentials there.
type Bound struct {
	Name        string
	Provider    provider.Provider
	Credentials provider.Credentials
}

// ProviderFor returns the adapter of a provider ("" is Stripe) with the
// account's credentials there. Stripe's falls back to acct.Credentials.
func (s *Service) ProviderFor(acct Account, name string) (Bound, error) {
	name = ProviderOf(name)
	prov, ok := s.providers[name]
	if !ok {
		return Bound{}, fmt.Errorf("%w: %s", ErrNoProvider, name)
	}
	c, ok := acct.CredentialsFor(name)
	if !ok {
		if name != ProviderStripe {
			return Bound{}, fmt.Errorf("%w: account %s has no credentials at %s", ErrNoProvider, acct.ID, name)
		}
		c = acct.Credentials
	}
	return Bound{Name: name, Provider: prov, Credentials: c}, nil
}

// attemptProvider is where an attempt goes: its own provider, else its
// payment's.
func attemptProvider(p *Payment, a *Attempt) string {
	if a.Provider != "" {
		return a.Provider
	}
	return p.Provider
}

// CallProvider learns the outcome of an attempt without ever starting a new one.
// A first send sends the attempt's request. A recovery (recovered is set:
// the key may have been sent before) asks the provider for a known object;
// inside the key's re-send window it re-sends the exact request with its
// key, with a deadline that ends inside the window, so the provider replays
// instead of acting twice; past the window, where a re-sent key would act
// again, it only looks objects up. provider.Judge decides what each answer
// proves.
func (s *Service) CallProvider(ctx context.Context, acct Account, p *Payment, a *Attempt, recovered bool) Outcome {
	ctx = logging.WithPayment(ctx, p.AccountID, p.ID)
	logging.SetAttempt(ctx, a.ID, attemptProvider(p, a))
	if s.tracer == nil {
		return s.call(ctx, acct, p, a, recovered)
	}
	ctx, span := s.tracer.Start(ctx, "provider.call", trace.WithAttributes(
		attribute.String("provider", attemptProvider(p, a)), attribute.String("operation", string(a.Operation)),
		attribute.String("payment_id", p.ID),
		attribute.String("account_id", p.AccountID), attribute.String("attempt_id", a.ID),
		attribute.Bool("recovery", recovered)))
	defer span.End()
	out := s.call(ctx, acct, p, a, recovered)
	span.SetAttributes(attribute.String("answer", string(out.Answer)), attribute.String("outcome", string(out.Outcome)))
	if out.Outcome == provider.Unknown {
		span.SetStatus(codes.Error, "outcome unknown")
	}
	return out
}

// call is CallProvider's work, in its span when tracing is on.
func (s *Service) call(ctx context.Context, acct Account, p *Payment, a *Attempt, recovered bool) Outcome {
	b, err := s.ProviderFor(acct, attemptProvider(p, a))
	if err != nil {
		// Nothing was sent: the attempt stays unknown for the reconciler
		// and the operator.
		s.log.LogAttrs(ctx, slog.LevelError, "provider call", slog.String("payment_id", p.ID),
			slog.String("attempt_id", a.ID), slog.Any("error", err))
		return Outcome{Result: provider.Result{Answer: provider.AnswerIndeterminate, Outcome: provider.Unknown, Err: err}}
	}
	now := s.clock()
	timeout := s.providerTimeout
	prof := b.Provider.Profile()
	until, resendable := s.resendUntil(b.Provider, a)
	inWindow := resendable && now.Before(until)
	if recovered && inWindow {
		timeout = min(timeout, until.Sub(now))
	}
	if a.LeaseExpiresAt != nil {
		// The call must end while its lease still keeps others from
		// sending the same attempt.
		timeout = min(timeout, a.LeaseExpiresAt.Sub(now))
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	start := time.Now()
	var (
		out  Outcome
		verb = "send"
	)
	switch {
	case recovered && a.Operation == OpAuthorize && a.ProviderObjectID != "":
		verb = "retrieve"
		in, err := b.Provider.RetrieveIntent(cctx, b.Credentials, a.ProviderObjectID)
		out = intentOutcome(prof, in, err)
	case !recovered:
		out = s.sendJudged(cctx, b, a, false)
	case inWindow:
		verb, out = s.resendOrLookup(cctx, b, p, a, until)
	default:
		verb, out = s.lookup(cctx, b, p, a, now)
	}
	s.metrics.ProviderCall(ProviderOf(attemptProvider(p, a)), a.Operation, out.Outcome, time.Since(start))
	s.log.LogAttrs(ctx, slog.LevelInfo, "provider call",
		slog.String("payment_id", p.ID), slog.String("attempt_id", a.ID), slog.String("operation", string(a.Operation)),
		slog.String("call", verb), slog.Bool("recovery", recovered), slog.String("answer", string(out.Answer)),
		slog.String("outcome", string(out.Outcome)), slog.Any("error", out.Err))
	return out
}

// sendJudged sends the attempt's request and judges the answer, inside the
// key's window.
func (s *Service) sendJudged(ctx context.Context, b Bound, a *Attempt, recovered bool) Outcome {
	out := send(ctx, b, a)
	out.Outcome = provider.Judge(b.Provider.Profile(), out.Answer, provider.Send{
		Recovery: recovered || out.Resent, InWindow: true, Authorize: a.Operation == OpAuthorize})
	return out
}

// resendOrLookup recovers an attempt inside its key's window by this
// clock. The provider forgets a key by its own clock, and a key re-sent
// after it was forgotten acts again: so a lookup goes first, which reads
// the provider's clock (the Date of its answer). While that clock too is
// inside the window the key is re-sent (CONTRACT §5: every recovery
// re-sends it); past it, the lookup's answer stands, as past the window.
func (s *Service) resendOrLookup(ctx context.Context, b Bound, p *Payment, a *Attempt, until time.Time) (string, Outcome) {
	c, ok := b.Provider.(provider.Clocked)
	if !ok {
		return "send", s.sendJudged(ctx, b, a, true)
	}
	verb, out := s.lookup(ctx, b, p, a, s.clock())
	if ahead := c.Clock().Ahead(); !s.clock().Add(ahead).Before(until) {
		s.log.LogAttrs(ctx, slog.LevelWarn, "provider clock past the key's window",
			slog.String("payment_id", p.ID), slog.String("attempt_id", a.ID), slog.Duration("provider_ahead", ahead))
		return verb, out
	}
	// Inside the window by both clocks: the key is re-sent, as every
	// recovery does, and the provider replays the first answer.
	return "send", s.sendJudged(ctx, b, a, true)
}

// lookup learns an attempt's outcome past its re-send window from the
// provider's objects: the intent an authorization made (searched by the
// payment's id), the intent a capture or cancel acted on, or the refund
// carrying the service's refund id.
func (s *Service) lookup(ctx context.Context, b Bound, p *Payment, a *Attempt, now time.Time) (string, Outcome) {
	prof := b.Provider.Profile()
	notFound := func(err error) Outcome {
		if !errors.Is(err, provider.ErrNotFound) {
			return intentOutcome(prof, nil, err)
		}
		return notFoundOutcome(prof, a, now)
	}
	switch a.Operation {
	case OpAuthorize:
		if as, ok := b.Provider.(provider.AttemptSearcher); ok {
			// The search matches this attempt alone.
			in, err := as.SearchIntentByAttempt(ctx, b.Credentials, p.ID, a.Number)
			if err != nil {
				return "search", notFound(err)
			}
			return "search", intentOutcome(prof, in, nil)
		}
		in, err := b.Provider.SearchIntentByPaymentID(ctx, b.Credentials, p.ID)
		if err == nil && in.Metadata["attempt"] != strconv.Itoa(a.Number) {
			// An earlier attempt of the same payment (before an ops replay)
			// carries the same payment_id: its intent says nothing about
			// this attempt.
			in, err = nil, provider.ErrNotFound
		}
		if err != nil {
			return "search", notFound(err)
		}
		return "search", intentOutcome(prof, in, nil)
	case OpCapture, OpCancel:
		in, err := b.Provider.RetrieveIntent(ctx, b.Credentials, p.ProviderPaymentID)
		if err != nil {
			return "retrieve", intentOutcome(prof, nil, err)
		}
		return "retrieve", inferFromIntent(a.Operation, in)
	default:
		return "list_refunds", s.lookupRefund(ctx, b, a, now)
	}
}

// notFoundOutcome judges a lookup that found nothing for the attempt:
// unknown within the provider's search lag, then failed
// not_found_at_provider.
func notFoundOutcome(prof provider.Profile, a *Attempt, now time.Time) Outcome {
	out := Outcome{Result: provider.Result{Answer: provider.AnswerNotFound, Err: provider.ErrNotFound}}
	out.Outcome = provider.Judge(prof, out.Answer, provider.Send{Recovery: true, Since: now.Sub(a.CreatedAt)})
	if out.Outcome == provider.Failed {
		out.FailureCode, out.FailureMessage = "not_found_at_provider", "the provider has no record of this attempt"
	}
	return out
}

// lookupRefund finds a refund attempt's refund among the intent's refunds:
// by the service's refund id in its metadata, or, at a provider that keeps
// no refund metadata, by elimination (refundByElimination).
func (s *Service) lookupRefund(ctx context.Context, b Bound, a *Attempt, now time.Time) Outcome {
	prof := b.Provider.Profile()
	var req provider.RefundRequest
	if err := json.Unmarshal(a.Request, &req); err != nil {
		return Outcome{Result: provider.Result{Outcome: provider.Unknown, Err: err}}
	}
	refunds, err := b.Provider.ListRefunds(ctx, b.Credentials, req.IntentID)
	if err != nil {
		return intentOutcome(prof, nil, err)
	}
	for i := range refunds {
		if id := req.Metadata["refund_id"]; id != "" && refunds[i].Metadata["refund_id"] == id {
			return refundFound(prof, &refunds[i])
		}
	}
	if !prof.RefundMetadata {
		return s.refundByElimination(ctx, prof, a, refunds, now)
	}
	// The list is complete and strongly consistent: a refund sent
	// before the key was forgotten would be in it.
	return notFoundOutcome(prof, a, now)
}

func refundFound(prof provider.Profile, r *provider.Refund) Outcome {
	return Outcome{Result: provider.Result{Outcome: provider.Judge(prof, provider.AnswerObject, provider.Send{Recovery: true}),
		Answer: provider.AnswerObject}, Refund: r}
}

// refundByElimination tells a refund at a provider that keeps no refund
// metadata (Mercado Pago) from the intent's refunds there. A refund the
// service stored as another refund's (its provider_refund_id) is claimed;
// of the rest, only those of this refund's amount can be this one (a
// refund made in the dashboard, of another amount, never can). While no
// other refund of the same amount is in doubt, none of them proves this
// one was not made (past the search lag, as any lookup that finds
// nothing), and exactly one is this one. Anything else (another refund of
// the amount in doubt, or several that fit) stays unknown for the
// reconciler and the operator: a guess could count one refund twice.
func (s *Service) refundByElimination(ctx context.Context, prof provider.Profile, a *Attempt, listed []provider.Refund, now time.Time) Outcome {
	unknown := func(err error) Outcome {
		return Outcome{Result: provider.Result{Outcome: provider.Unknown, Answer: provider.AnswerIndeterminate, Err: err}}
	}
	mine, err := s.store.RefundGetByAttempt(ctx, a.ID)
	if err != nil {
		return unknown(err)
	}
	local, err := s.store.RefundListByPayment(ctx, mine.PaymentID)
	if err != nil {
		return unknown(err)
	}
	claimed := map[string]bool{}
	for _, r := range local {
		switch {
		case r.ID == mine.ID:
		case r.ProviderRefundID != "":
			claimed[r.ProviderRefundID] = true
		case (r.Status == RefundProcessing || r.Status == RefundUnknown) && r.Amount == mine.Amount:
			return unknown(errors.New("another refund of the payment of the same amount is in doubt: the provider's refunds cannot be told apart"))
		}
	}
	var fits []provider.Refund
	for _, r := range listed {
		if !claimed[r.ID] && r.Amount == mine.Amount {
			fits = append(fits, r)
		}
	}
	switch len(fits) {
	case 0:
		return notFoundOutcome(prof, a, now)
	case 1:
		return refundFound(prof, &fits[0])
	}
	return unknown(fmt.Errorf("the provider shows %d refunds of this refund's amount that no other refund claims", len(fits)))
}

// send sends the attempt's stored request unchanged.
func send(ctx context.Context, b Bound, a *Attempt) Outcome {
	fail := func(err error) Outcome {
		return Outcome{Result: provider.Result{Answer: provider.AnswerIndeterminate, Err: err}}
	}
	switch a.Operation {
	case OpAuthorize:
		var r provider.AuthorizeRequest
		if err := json.Unmarshal(a.Request, &r); err != nil {
			return fail(err)
		}
		return Outcome{Result: b.Provider.Authorize(ctx, b.Credentials, r)}
	case OpCapture:
		var r provider.CaptureRequest
		if err := json.Unmarshal(a.Request, &r); err != nil {
			return fail(err)
		}
		return Outcome{Result: b.Provider.Capture(ctx, b.Credentials, r)}
	case OpCancel:
		var r provider.CancelRequest
		if err := json.Unmarshal(a.Request, &r); err != nil {
			return fail(err)
		}
		return Outcome{Result: b.Provider.Cancel(ctx, b.Credentials, r)}
	default:
		var r provider.RefundRequest
		if err := json.Unmarshal(a.Request, &r); err != nil {
			return fail(err)
		}
		rr := b.Provider.Refund(ctx, b.Credentials, r)
		return Outcome{Result: provider.Result{Answer: rr.Answer, Resent: rr.Resent, FailureCode: rr.FailureCode,
			FailureMessage: rr.FailureMessage, Err: rr.Err}, Refund: rr.Refund}
	}
}

// intentOutcome judges a lookup of an intent; a lookup that could not ask
// is indeterminate.
func intentOutcome(prof provider.Profile, in *provider.Intent, err error) Outcome {
	a := provider.AnswerObject
	if err != nil {
		a = provider.AnswerIndeterminate
	}
	return Outcome{Result: provider.Result{Outcome: provider.Judge(prof, a, provider.Send{Recovery: true}), Answer: a, Intent: in, Err: err}}
}

// inferFromIntent decides a capture or cancel from the intent's state, once
// the provider may have forgotten the attempt's key: the operation's own
// end state proves it happened; any other settled state proves it did not.
func inferFromIntent(op Operation, in *provider.Intent) Outcome {
	done := (op == OpCapture && in.State == provider.IntentCaptured) || (op == OpCancel && in.State == provider.IntentCanceled)
	switch {
	case done:
		return Outcome{Result: provider.Result{Outcome: provider.Succeeded, Answer: provider.AnswerObject, Intent: in}}
	case in.State == provider.IntentAuthorized, in.State == provider.IntentCaptured, in.State == provider.IntentCanceled,
		// A cancel that reached the provider takes effect at once: an
		// intent in any other known state was never canceled.
		op == OpCancel && in.State != provider.IntentOther:
		return Outcome{Result: provider.Result{Outcome: provider.Failed, Answer: provider.AnswerObject, Intent: in,
			FailureCode: "no_effect_at_provider", FailureMessage: "the provider shows the payment " + string(in.State)}}
	}
	return Outcome{Result: provider.Result{Outcome: provider.Unknown, Answer: provider.AnswerObject, Intent: in}}
}
