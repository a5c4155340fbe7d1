package payment

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error code of the contract.
type Code string

const (
	CodeIdempotencyKeyMissing Code = "idempotency_key_missing"
	CodeIdempotencyKeyInvalid Code = "idempotency_key_invalid"
	CodeInvalidRequest        Code = "invalid_request"
	CodeUnauthorized          Code = "unauthorized"
	CodeNotFound              Code = "not_found"
	CodeIdempotencyKeyInUse   Code = "idempotency_key_in_use"
	CodeOrderHasActivePayment Code = "order_has_active_payment"
	CodeRequestTooLarge       Code = "request_too_large"
	CodeUnsupportedMediaType  Code = "unsupported_media_type"
	CodeIdempotencyKeyReused  Code = "idempotency_key_reused"
	CodeInvalidState          Code = "invalid_state"
	CodeRefundExceedsCaptured Code = "refund_exceeds_captured"
	CodeOutcomeUnknown        Code = "outcome_unknown"
	CodeCredentialsInUse      Code = "provider_credentials_in_use"
	CodeUnavailable           Code = "unavailable"
	CodeInternal              Code = "internal_error"
)

// FieldError names one problem with one request field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is the one error type of the domain. The api package maps Code to an
// HTTP status; Message is safe to show to the caller.
type Error struct {
	Code      Code
	Message   string
	Fields    []FieldError
	PaymentID string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, CodeInternal for anything unexpected.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrNotFound is returned by stores when a row does not exist.
var ErrNotFound = Errorf(CodeNotFound, "not found")
