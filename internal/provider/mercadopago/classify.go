package mercadopago

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"

	"github.com/mercadopago/sdk-go/pkg/mperror"

	"github.com/acmepay/payments/internal/provider"
)

// op names an adapter operation, for logs.
type op string

const (
	opAuthorize op = "authorize"
	opCapture   op = "capture"
	opCancel    op = "cancel"
	opRefund    op = "refund"
)

// Failure codes the adapter sets itself, when Mercado Pago gave none.
const (
	codeAuthentication = provider.FailureCredentials
	codeUnreachable    = provider.FailureUnreachable
	codeMissingToken   = "missing_access_token"
	codeMissingIntent  = "missing_intent_id"
	codeMissingKey     = "missing_idempotency_key"
	codeUnsupported    = "unsupported_request"
)

// verdict is what one Mercado Pago answer shows; provider.Judge decides what
// it proves.
type verdict struct {
	answer  provider.Answer
	code    string
	message string
	// err is a loggable form of the error, set for indeterminate and
	// credentials answers.
	err error
}

// apiBody is Mercado Pago's error body: {"message","error","status","cause"}.
type apiBody struct {
	Message string `json:"message"`
	Error   string `json:"error"`
	Cause   []struct {
		Code        json.RawMessage `json:"code"`
		Description string          `json:"description"`
	} `json:"cause"`
}

// classifyCall classifies one sdk-go call by what its transport did and the
// error it ended with: a call that wrote nothing never reached Mercado
// Pago, whatever the error says.
func classifyCall(err error, cl *call) verdict {
	if cl.wire != nil && cl.wire.Unreached(err) {
		return verdict{answer: provider.AnswerUnreachable, code: codeUnreachable,
			message: "mercadopago could not be reached", err: loggable(err)}
	}
	return classify(err)
}

// classify maps the error of one sdk-go call to the kind of answer it is
// (CONTRACT §5). Anything that is not a clear answer is indeterminate.
// Mercado Pago answers a card refusal with 201 and status rejected, so a
// decline is never an error here (see declined).
func classify(err error) verdict {
	if err == nil {
		return verdict{answer: provider.AnswerObject}
	}
	// A deadline or cancellation means the request may have reached Mercado
	// Pago, however the SDK wrapped it.
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return unknown(err)
	}
	var re *mperror.ResponseError
	if !errors.As(err, &re) {
		// Connection reset, EOF, undecodable 2xx body, ...
		return unknown(err)
	}
	switch status := re.StatusCode; {
	case status == 401 || status == 403:
		// Checked before the key is looked up; the body is not passed on.
		return verdict{answer: provider.AnswerCredentials, code: codeAuthentication,
			message: "mercadopago rejected the credentials", err: loggable(err)}
	case status == 400 || status == 404:
		code, msg := errorCode(re.Message)
		return verdict{answer: provider.AnswerInvalid, code: code, message: msg}
	}
	// 409 (the key's first request still running, or the key reused with
	// another body), 429, 5xx, an unreadable body, anything else.
	return unknown(err)
}

// errorCode reads the error and the first cause of a Mercado Pago error body.
func errorCode(body string) (code, msg string) {
	var b apiBody
	if json.Unmarshal([]byte(body), &b) != nil {
		return "invalid_request", "mercadopago rejected the request"
	}
	code, msg = b.Error, b.Message
	if len(b.Cause) > 0 {
		if c := string(b.Cause[0].Code); c != "" && c != "null" {
			var s string
			if json.Unmarshal(b.Cause[0].Code, &s) != nil {
				s = c // a number
			}
			code = s
		}
		if b.Cause[0].Description != "" {
			msg = b.Cause[0].Description
		}
	}
	if code == "" {
		code = "invalid_request"
	}
	return code, msg
}

func unknown(err error) verdict {
	return verdict{answer: provider.AnswerIndeterminate, err: loggable(err)}
}

// apiError is the part of a Mercado Pago error that is safe to log: the
// SDK's own Error() is the whole response body.
type apiError struct {
	status    int
	requestID string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("mercadopago: http %d request_id=%s", e.status, e.requestID)
}

// errUnexpected stands for errors whose text may quote a response body.
var errUnexpected = errors.New("mercadopago: unexpected response")

// loggable returns an error that can be logged without leaking tokens, keys
// or bodies, keeping context errors reachable with errors.Is.
func loggable(err error) error {
	var re *mperror.ResponseError
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.As(err, &re):
		return &apiError{status: re.StatusCode, requestID: re.Headers.Get("X-Request-Id")}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.As(err, &ue), errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, errNoKey):
		// Transport errors carry the method and URL only; the key and the
		// token travel in headers.
		return err
	default:
		return errUnexpected
	}
}
