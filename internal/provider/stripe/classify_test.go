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

func TestClassify(t *testing.T) {
	t.Parallel()
	declineWithIntent := stripeErr(402, stripego.ErrorTypeCard, stripego.ErrorCodeCardDeclined)
	declineWithIntent.DeclineCode = stripego.DeclineCodeInsufficientFunds
	declineWithIntent.PaymentIntent = &stripego.PaymentIntent{ID: "pi_1", Status: "requires_payment_method"}
	urlTimeout := &url.Error{Op: "Post", URL: "https://api.stripe.com/v1/payment_intents", Err: context.DeadlineExceeded}

	tests := []struct {
		name     string
		op       op
		err      error
		want     provider.Outcome
		wantCode string
	}{
		{"success", opAuthorize, nil, provider.Succeeded, ""},
		{"card declined with decline code", opAuthorize, declineWithIntent, provider.Declined, "insufficient_funds"},
		{"card error without decline code", opAuthorize, stripeErr(402, stripego.ErrorTypeCard, stripego.ErrorCodeExpiredCard), provider.Declined, "expired_card"},
		{"card error on capture is failed", opCapture, stripeErr(402, stripego.ErrorTypeCard, stripego.ErrorCodeCardDeclined), provider.Failed, "card_declined"},
		{"card error with 500 status", opAuthorize, stripeErr(500, stripego.ErrorTypeCard, ""), provider.Unknown, ""},
		{"invalid request 400", opAuthorize, stripeErr(400, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeParameterMissing), provider.Failed, "parameter_missing"},
		{"invalid request 400 without code", opRefund, stripeErr(400, stripego.ErrorTypeInvalidRequest, ""), provider.Failed, "invalid_request_error"},
		{"invalid request 404", opCapture, stripeErr(404, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeResourceMissing), provider.Failed, "resource_missing"},
		{"unexpected state", opCancel, stripeErr(400, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodePaymentIntentUnexpectedState), provider.Failed, "payment_intent_unexpected_state"},
		{"idempotency 400 other params", opAuthorize, stripeErr(400, stripego.ErrorTypeIdempotency, ""), provider.Unknown, ""},
		{"idempotency 409 in flight", opAuthorize, stripeErr(409, stripego.ErrorTypeIdempotency, stripego.ErrorCodeIdempotencyKeyInUse), provider.Unknown, ""},
		{"key in use as invalid request", opAuthorize, stripeErr(409, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeIdempotencyKeyInUse), provider.Unknown, ""},
		{"key in use with 400", opAuthorize, stripeErr(400, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeIdempotencyKeyInUse), provider.Unknown, ""},
		{"401", opAuthorize, stripeErr(401, stripego.ErrorTypeInvalidRequest, ""), provider.Failed, codeAuthentication},
		{"403", opRefund, stripeErr(403, stripego.ErrorTypeInvalidRequest, ""), provider.Failed, codeAuthentication},
		{"402 invalid request", opAuthorize, stripeErr(402, stripego.ErrorTypeInvalidRequest, ""), provider.Unknown, ""},
		{"429 rate limit", opAuthorize, stripeErr(429, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeRateLimit), provider.Unknown, ""},
		{"429 lock timeout", opCapture, stripeErr(429, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeLockTimeout), provider.Unknown, ""},
		{"500 api error", opAuthorize, stripeErr(500, stripego.ErrorTypeAPI, ""), provider.Unknown, ""},
		{"503", opAuthorize, stripeErr(503, "", ""), provider.Unknown, ""},
		{"api error with 400", opAuthorize, stripeErr(400, stripego.ErrorTypeAPI, ""), provider.Unknown, ""},
		{"unrecognised type", opAuthorize, stripeErr(400, "something_new", ""), provider.Unknown, ""},
		{"no status", opAuthorize, stripeErr(0, stripego.ErrorTypeInvalidRequest, ""), provider.Unknown, ""},
		{"deadline", opAuthorize, context.DeadlineExceeded, provider.Unknown, ""},
		{"canceled", opAuthorize, context.Canceled, provider.Unknown, ""},
		{"deadline in url error", opAuthorize, urlTimeout, provider.Unknown, ""},
		{"deadline wrapped twice", opCapture, fmt.Errorf("call: %w", urlTimeout), provider.Unknown, ""},
		{"deadline next to a stripe error", opAuthorize, errors.Join(context.DeadlineExceeded, stripeErr(400, stripego.ErrorTypeInvalidRequest, "")), provider.Unknown, ""},
		{"connection reset", opAuthorize, &url.Error{Op: "Post", URL: "u", Err: &net.OpError{Op: "read", Err: syscall.ECONNRESET}}, provider.Unknown, ""},
		{"eof", opAuthorize, io.EOF, provider.Unknown, ""},
		{"unexpected eof", opRefund, io.ErrUnexpectedEOF, provider.Unknown, ""},
		{"undecodable body", opAuthorize, errors.New("Couldn't deserialize JSON (response status: 200, body sample: 'pm_123')"), provider.Unknown, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := classify(tt.op, tt.err)
			if v.outcome != tt.want {
				t.Fatalf("outcome: got %q, want %q", v.outcome, tt.want)
			}
			if v.code != tt.wantCode {
				t.Fatalf("code: got %q, want %q", v.code, tt.wantCode)
			}
			if got := v.err != nil; got != (tt.want == provider.Unknown) {
				t.Fatalf("err set: got %v, want it only for unknown", got)
			}
		})
	}
}

func TestClassifyKeepsDeclineDetails(t *testing.T) {
	t.Parallel()
	e := stripeErr(402, stripego.ErrorTypeCard, stripego.ErrorCodeCardDeclined)
	e.Msg = "Your card was declined."
	e.PaymentIntent = &stripego.PaymentIntent{ID: "pi_1"}
	v := classify(opAuthorize, e)
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
	if v := classify(opAuthorize, e); strings.Contains(v.message, "sk_") {
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
