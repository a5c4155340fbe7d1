package stripe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"

	stripego "github.com/stripe/stripe-go/v76"

	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/reach"
)

// op names an adapter operation, for classification and logs.
type op string

const (
	opAuthorize op = "authorize"
	opCapture   op = "capture"
	opCancel    op = "cancel"
	opRefund    op = "refund"
)

// Failure codes the adapter sets itself, when Stripe gave none.
const (
	codeAuthentication = provider.FailureCredentials
	codeUnreachable    = provider.FailureUnreachable
	codeMissingKey     = "missing_secret_key"
	codeMissingIntent  = "missing_intent_id"
)

// verdict is what one Stripe answer shows; provider.Judge decides what it
// proves.
type verdict struct {
	answer  provider.Answer
	code    string
	message string
	// intent is the PaymentIntent Stripe attached to an error, if any.
	intent *stripego.PaymentIntent
	// err is a loggable form of the error, set for indeterminate answers.
	err error
}

// classifyCall classifies one stripe-go call by what its transport did and
// the error it ended with: a call that wrote nothing on any try (stripe-go's
// own retries included) never reached Stripe, whatever the error says.
func classifyCall(err error, call *reach.Call) verdict {
	if call.Unreached(err) {
		return verdict{answer: provider.AnswerUnreachable, code: codeUnreachable,
			message: "stripe could not be reached", err: loggable(err)}
	}
	return classify(err)
}

// classify maps the error of one stripe-go call to the kind of answer it is
// (CONTRACT §5). Anything that is not a clear answer from Stripe is
// indeterminate.
func classify(err error) verdict {
	if err == nil {
		return verdict{answer: provider.AnswerObject}
	}
	// Checked before anything else: a deadline or cancellation means the
	// request may have reached Stripe, however stripe-go wrapped it.
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return unknown(err)
	}
	var se *stripego.Error
	if !errors.As(err, &se) {
		// Connection reset, EOF, undecodable response, ...
		return unknown(err)
	}
	status := se.HTTPStatusCode
	switch {
	case se.Type == stripego.ErrorTypeIdempotency,
		se.Code == stripego.ErrorCodeIdempotencyKeyInUse,
		status == 409:
		// Same key with other params, or the first request still running:
		// the original request's fate is not in this answer.
		return unknown(err)
	case status == 429, status >= 500, se.Type == stripego.ErrorTypeAPI:
		return unknown(err)
	case status == 402 && se.Type == stripego.ErrorTypeCard:
		v := verdict{answer: provider.AnswerCardError, code: string(se.Code), message: se.Msg, intent: se.PaymentIntent}
		if se.DeclineCode != "" {
			v.code = string(se.DeclineCode)
		}
		if se.Code == stripego.ErrorCodePaymentIntentAuthenticationFailure {
			v.code = provider.FailureAuthentication
		}
		return v
	case status == 401 || status == 403:
		// Its message may echo part of the key, so it is not passed on.
		return verdict{answer: provider.AnswerCredentials, code: codeAuthentication, message: "stripe rejected the credentials",
			err: loggable(err)}
	case (status == 400 || status == 404) && se.Type == stripego.ErrorTypeInvalidRequest:
		code := string(se.Code)
		if code == "" {
			code = string(se.Type)
		}
		return verdict{answer: provider.AnswerInvalid, code: code, message: se.Msg, intent: se.PaymentIntent}
	}
	return unknown(err)
}

func unknown(err error) verdict {
	return verdict{answer: provider.AnswerIndeterminate, err: loggable(err)}
}

// apiError is the part of a Stripe error that is safe to log: stripe-go's own
// Error() serialises the whole object, payment method included.
type apiError struct {
	status    int
	typ       string
	code      string
	requestID string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("stripe: http %d type=%s code=%s request_id=%s", e.status, e.typ, e.code, e.requestID)
}

// errUnexpected stands for errors whose text may quote a response body.
var errUnexpected = errors.New("stripe: unexpected response")

// loggable returns an error that can be logged without leaking keys, bodies
// or payment methods, keeping context errors reachable with errors.Is.
func loggable(err error) error {
	var se *stripego.Error
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.As(err, &se):
		return &apiError{status: se.HTTPStatusCode, typ: string(se.Type), code: string(se.Code), requestID: se.RequestID}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.As(err, &ue), errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// Transport errors carry the method and URL only; the key travels in
		// a header and bodies are not part of them.
		return err
	default:
		return errUnexpected
	}
}
