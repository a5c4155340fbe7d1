package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
)

const codeMethodNotAllowed payment.Code = "method_not_allowed"

// statusOf and statusOfKind are the only maps from the domain's answers
// to HTTP statuses. statusOf maps error codes.
var statusOf = map[payment.Code]int{
	payment.CodeIdempotencyKeyMissing: http.StatusBadRequest,
	payment.CodeIdempotencyKeyInvalid: http.StatusBadRequest,
	payment.CodeInvalidRequest:        http.StatusBadRequest,
	payment.CodeUnauthorized:          http.StatusUnauthorized,
	payment.CodeNotFound:              http.StatusNotFound,
	codeMethodNotAllowed:              http.StatusMethodNotAllowed,
	payment.CodeIdempotencyKeyInUse:   http.StatusConflict,
	payment.CodeOrderHasActivePayment: http.StatusConflict,
	payment.CodeInvalidState:          http.StatusConflict,
	payment.CodeRefundExceedsCaptured: http.StatusConflict,
	payment.CodeOutcomeUnknown:        http.StatusConflict,
	payment.CodeProviderRejected:      http.StatusConflict,
	payment.CodeCredentialsInUse:      http.StatusConflict,
	payment.CodeLimitExceeded:         http.StatusConflict,
	payment.CodeRequestTooLarge:       http.StatusRequestEntityTooLarge,
	payment.CodeUnsupportedMediaType:  http.StatusUnsupportedMediaType,
	payment.CodeIdempotencyKeyReused:  http.StatusUnprocessableEntity,
	payment.CodeUnavailable:           http.StatusServiceUnavailable,
	payment.CodeRateLimited:           http.StatusTooManyRequests,
	payment.CodeInternal:              http.StatusInternalServerError,
}

// statusOfKind maps what a stored answer says to its HTTP status; a
// refusal takes the status of its error's code, from statusOf.
var statusOfKind = map[idempotency.Kind]int{
	idempotency.KindCreated:  http.StatusCreated,
	idempotency.KindAccepted: http.StatusAccepted,
	idempotency.KindOK:       http.StatusOK,
}

// problem is an RFC 9457 problem document.
type problem struct {
	Type      string               `json:"type"`
	Title     string               `json:"title"`
	Status    int                  `json:"status"`
	Detail    string               `json:"detail"`
	Code      payment.Code         `json:"code"`
	RequestID string               `json:"request_id"`
	Errors    []payment.FieldError `json:"errors,omitempty"`
	PaymentID string               `json:"payment_id,omitempty"`
	// ProviderCode is the provider's reason for a provider_rejected.
	ProviderCode string `json:"provider_code,omitempty"`
}

// writeError answers err as problem+json; see writeProblem.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	writeProblem(s.log, w, r, err)
}

// writeProblem is the only writer of problem+json for an arbitrary error.
// Unexpected errors are logged with the request id and never shown.
func writeProblem(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	var e *payment.Error
	switch {
	case errors.As(err, &e):
	case clientGone(r):
		// What failed is most likely the work the client abandoned; nobody
		// reads this answer, and the access log counts it as a disconnect.
		log.DebugContext(r.Context(), "request abandoned by the client", slog.String("error", err.Error()))
		e = payment.Errorf(payment.CodeInternal, "the client went away")
	case errors.Is(err, payment.ErrUnavailable):
		log.ErrorContext(r.Context(), "database unavailable", slog.String("error", err.Error()))
		e = payment.Errorf(payment.CodeUnavailable, "the service is temporarily unavailable; retry with the same Idempotency-Key")
	default:
		log.ErrorContext(r.Context(), "internal error", slog.String("error", err.Error()))
		e = payment.Errorf(payment.CodeInternal, "internal error; retry with the same Idempotency-Key")
	}
	renderProblem(w, r, e)
}

// renderProblem writes a domain error as problem+json; it logs nothing, so
// a middleware that only refuses needs no logger.
func renderProblem(w http.ResponseWriter, r *http.Request, e *payment.Error) {
	status, ok := statusOf[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	switch e.Code {
	case payment.CodeIdempotencyKeyInUse:
		w.Header().Set("Retry-After", "1")
	case payment.CodeUnavailable:
		w.Header().Set("Retry-After", "2")
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problem{
		Type: "https://docs.acmepay.dev/problems/" + string(e.Code), Title: http.StatusText(status),
		Status: status, Detail: e.Message, Code: e.Code, RequestID: logging.RequestID(r.Context()),
		Errors: e.Fields, PaymentID: e.PaymentID, ProviderCode: e.ProviderCode,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
