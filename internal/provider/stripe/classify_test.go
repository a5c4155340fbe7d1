package stripe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/acmepay/payments/internal/provider"
)

func stripeErr(status int, typ stripego.ErrorType, code stripego.ErrorCode) *stripego.Error {
	return &stripego.Error{HTTPStatusCode: status, Type: typ, Code: code, Msg: "msg", RequestID: "req_1"}
}

// TestJudgeStripeAnswers runs every Stripe answer through the adapter's
// classification and provider.Judge, for a first send, a recovery inside
// the key's re-send window and one past it (CONTRACT §5's proof table).
func TestJudgeStripeAnswers(t *testing.T) {
	t.Parallel()
	declineWithIntent := stripeErr(402, stripego.ErrorTypeCard, stripego.ErrorCodeCardDeclined)
	declineWithIntent.DeclineCode = stripego.DeclineCodeInsufficientFunds
	declineWithIntent.PaymentIntent = &stripego.PaymentIntent{ID: "pi_1", Status: "requires_payment_method"}
	urlTimeout := &url.Error{Op: "Post", URL: "https://api.stripe.com/v1/payment_intents", Err: context.DeadlineExceeded}
	const (
		S = provider.Succeeded
		D = provider.Declined
		F = provider.Failed
		U = provider.Unknown
	)
	tests := []struct {
		name               string
		op                 op
		err                error
		first, in, pastWin provider.Outcome
		wantCode           string
	}{
		{"success", opAuthorize, nil, S, S, S, ""},
		{"success capture", opCapture, nil, S, S, S, ""},
		{"card declined with decline code", opAuthorize, declineWithIntent, D, D, D, "insufficient_funds"},
		{"card error without decline code", opAuthorize, stripeErr(402, stripego.ErrorTypeCard, stripego.ErrorCodeExpiredCard), D, D, D, "expired_card"},
		{"card error on capture is failed", opCapture, stripeErr(402, stripego.ErrorTypeCard, stripego.ErrorCodeCardDeclined), F, F, F, "card_declined"},
		{"card error on refund is failed", opRefund, stripeErr(402, stripego.ErrorTypeCard, stripego.ErrorCodeCardDeclined), F, F, F, "card_declined"},
		{"card error with 500 status", opAuthorize, stripeErr(500, stripego.ErrorTypeCard, ""), U, U, U, ""},
		{"invalid request 400", opAuthorize, stripeErr(400, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeParameterMissing), F, F, U, "parameter_missing"},
		{"invalid request 400 without code", opRefund, stripeErr(400, stripego.ErrorTypeInvalidRequest, ""), F, F, U, "invalid_request_error"},
		{"invalid request 404", opCapture, stripeErr(404, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeResourceMissing), F, F, U, "resource_missing"},
		{"unexpected state", opCancel, stripeErr(400, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodePaymentIntentUnexpectedState), F, F, U, "payment_intent_unexpected_state"},
		{"idempotency 400 other params", opAuthorize, stripeErr(400, stripego.ErrorTypeIdempotency, ""), U, U, U, ""},
		{"idempotency 409 in flight", opAuthorize, stripeErr(409, stripego.ErrorTypeIdempotency, stripego.ErrorCodeIdempotencyKeyInUse), U, U, U, ""},
		{"key in use as invalid request", opAuthorize, stripeErr(409, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeIdempotencyKeyInUse), U, U, U, ""},
		{"key in use with 400", opAuthorize, stripeErr(400, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeIdempotencyKeyInUse), U, U, U, ""},
		{"401", opAuthorize, stripeErr(401, stripego.ErrorTypeInvalidRequest, ""), F, U, U, codeAuthentication},
		{"401 on capture", opCapture, stripeErr(401, stripego.ErrorTypeInvalidRequest, ""), F, U, U, codeAuthentication},
		{"403", opRefund, stripeErr(403, stripego.ErrorTypeInvalidRequest, ""), F, U, U, codeAuthentication},
		{"403 on cancel", opCancel, stripeErr(403, stripego.ErrorTypeInvalidRequest, ""), F, U, U, codeAuthentication},
		{"402 invalid request", opAuthorize, stripeErr(402, stripego.ErrorTypeInvalidRequest, ""), U, U, U, ""},
		{"429 rate limit", opAuthorize, stripeErr(429, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeRateLimit), U, U, U, ""},
		{"429 lock timeout", opCapture, stripeErr(429, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeLockTimeout), U, U, U, ""},
		{"500 api error", opAuthorize, stripeErr(500, stripego.ErrorTypeAPI, ""), U, U, U, ""},
		{"503", opAuthorize, stripeErr(503, "", ""), U, U, U, ""},
		{"api error with 400", opAuthorize, stripeErr(400, stripego.ErrorTypeAPI, ""), U, U, U, ""},
		{"unrecognised type", opAuthorize, stripeErr(400, "something_new", ""), U, U, U, ""},
		{"no status", opAuthorize, stripeErr(0, stripego.ErrorTypeInvalidRequest, ""), U, U, U, ""},
		{"deadline", opAuthorize, context.DeadlineExceeded, U, U, U, ""},
		{"canceled", opAuthorize, context.Canceled, U, U, U, ""},
		{"deadline in url error", opAuthorize, urlTimeout, U, U, U, ""},
		{"deadline wrapped twice", opCapture, fmt.Errorf("call: %w", urlTimeout), U, U, U, ""},
		{"deadline next to a stripe error", opAuthorize, errors.Join(context.DeadlineExceeded, stripeErr(400, stripego.ErrorTypeInvalidRequest, "")), U, U, U, ""},
		{"connection reset", opAuthorize, &url.Error{Op: "Post", URL: "u", Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}, U, U, U, ""},
		{"eof", opAuthorize, io.EOF, U, U, U, ""},
		{"unexpected eof", opRefund, io.ErrUnexpectedEOF, U, U, U, ""},
		{"undecodable body", opAuthorize, errors.New("Couldn't deserialize JSON (response status: 200, body sample: 'pm_123')"), U, U, U, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := classify(tt.err)
			auth := tt.op == opAuthorize
			for _, c := range []struct {
				name string
				send provider.Send
				want provider.Outcome
			}{
				{"first send", provider.Send{Authorize: auth, InWindow: true}, tt.first},
				{"recovery in window", provider.Send{Authorize: auth, Recovery: true, InWindow: true}, tt.in},
				{"recovery past window", provider.Send{Authorize: auth, Recovery: true}, tt.pastWin},
			} {
				if got := provider.Judge(New(Config{}).Profile(), v.answer, c.send); got != c.want {
					t.Errorf("%s: got %q, want %q (answer %q)", c.name, got, c.want, v.answer)
				}
			}
			if v.code != tt.wantCode {
				t.Errorf("code: got %q, want %q", v.code, tt.wantCode)
			}
			if got := v.err != nil; got != (v.answer == provider.AnswerIndeterminate || v.answer == provider.AnswerCredentials) {
				t.Errorf("err set: got %v, want it only for indeterminate and credential answers", got)
			}
		})
	}
}

func TestClassifyKeepsDeclineDetails(t *testing.T) {
	t.Parallel()
	e := stripeErr(402, stripego.ErrorTypeCard, stripego.ErrorCodeCardDeclined)
	e.Msg = "Your card was declined."
	e.PaymentIntent = &stripego.PaymentIntent{ID: "pi_1"}
	v := classify(e)
	if v.message != e.Msg {
		t.Fatalf("message: got %q, want %q", v.message, e.Msg)
	}
	if v.intent == nil || v.intent.ID != "pi_1" {
		t.Fatalf("intent: got %+v, want pi_1", v.intent)
	}
}

func TestClassifyHidesAuthMessage(t *testing.T) {
	t.Parallel()
	e := stripeErr(401, stripego.ErrorTypeInvalidRequest, "")
	e.Msg = "Invalid API Key provided: sk_test_****abcd"
	if v := classify(e); strings.Contains(v.message, "sk_") {
		t.Fatalf("message leaks the key: %q", v.message)
	}
}

func TestLoggable(t *testing.T) {
	t.Parallel()
	e := stripeErr(500, stripego.ErrorTypeAPI, "")
	e.PaymentMethod = &stripego.PaymentMethod{ID: "pm_secret"}
	if got := loggable(e).Error(); strings.Contains(got, "pm_secret") || !strings.Contains(got, "req_1") {
		t.Fatalf("stripe error: got %q", got)
	}
	wrapped := fmt.Errorf("x: %w", &url.Error{Op: "Post", URL: "u", Err: context.DeadlineExceeded})
	if got := loggable(wrapped); !errors.Is(got, context.DeadlineExceeded) {
		t.Fatalf("deadline lost: got %v", got)
	}
	if got := loggable(errors.New("body sample: 'pm_secret'")).Error(); strings.Contains(got, "pm_secret") {
		t.Fatalf("body leaked: got %q", got)
	}
}

func TestSearchQuery(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"pay_1", `metadata['payment_id']:'pay_1'`},
		{`a'b`, `metadata['payment_id']:'a\'b'`},
		{`a\'`, `metadata['payment_id']:'a\\\''`},
	}
	for _, tt := range tests {
		if got := searchQuery(tt.in); got != tt.want {
			t.Fatalf("searchQuery(%q): got %s, want %s", tt.in, got, tt.want)
		}
	}
}
