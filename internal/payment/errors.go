package payment

import (
	"encoding/json"
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
	CodeProviderRejected      Code = "provider_rejected"
	CodeCredentialsInUse      Code = "provider_credentials_in_use"
	CodeLimitExceeded         Code = "limit_exceeded"
	CodeUnavailable           Code = "unavailable"
	// CodeRateLimited: too many failed admin authentications from one
	// client address.
	CodeRateLimited Code = "rate_limited"
	CodeInternal    Code = "internal_error"
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
	// ProviderCode is the provider's reason for a provider_rejected.
	ProviderCode string
}

// storedError is how an error answer is kept under a client key, so that a
// retry gets the same answer; the api renders it as problem+json.
type storedError struct {
	Code         Code   `json:"code"`
	Message      string `json:"detail"`
	PaymentID    string `json:"payment_id,omitempty"`
	ProviderCode string `json:"provider_code,omitempty"`
}

// encodeStored renders e for storage under a client key.
func (e *Error) encodeStored() ([]byte, error) {
	return json.Marshal(storedError{Code: e.Code, Message: e.Message, PaymentID: e.PaymentID, ProviderCode: e.ProviderCode})
}

// DecodeStoredError reads an error answer stored under a client key.
func DecodeStoredError(body []byte) (*Error, error) {
	var se storedError
	if err := json.Unmarshal(body, &se); err != nil || se.Code == "" {
		return nil, fmt.Errorf("payment: stored error answer unreadable: %v", err)
	}
	return &Error{Code: se.Code, Message: se.Message, PaymentID: se.PaymentID, ProviderCode: se.ProviderCode}, nil
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

// ErrUnavailable is what a store's failure to reach its database wraps:
// the caller may retry with the same key (503). It is not an *Error, so the
// engine retries it and never keeps it as the answer of a key.
var ErrUnavailable = errors.New("unavailable")

// ErrNotFound is returned by stores when a row does not exist.
var ErrNotFound = Errorf(CodeNotFound, "not found")
