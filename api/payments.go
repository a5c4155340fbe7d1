package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
	"github.com/go-chi/chi/v5"
)

// maxBody bounds every request body.
const maxBody = 64 << 10

// retryAfterUnknown is what a 202 asks the client to wait before retrying.
const retryAfterUnknown = "2"

// readJSON checks the media type and the size; both are rejected before
// anything is reserved, so the caller may fix the request and reuse its key.
func readJSON(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if !isJSON(r.Header.Get("Content-Type")) {
		return nil, payment.Errorf(payment.CodeUnsupportedMediaType, "send the body as application/json")
	}
	if r.ContentLength > maxBody {
		return nil, payment.Errorf(payment.CodeRequestTooLarge, "the body must be at most %d bytes", maxBody)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, payment.Errorf(payment.CodeRequestTooLarge, "the body must be at most %d bytes", maxBody)
	case err != nil:
		return nil, payment.Errorf(payment.CodeInvalidRequest, "the body could not be read")
	}
	return body, nil
}

// isJSON says whether a Content-Type is application/json. The bare type,
// what nearly every client sends, needs no parse.
func isJSON(contentType string) bool {
	if contentType == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// idempotencyKey parses the header and puts its hash on the request's logs.
func idempotencyKey(r *http.Request) (string, error) {
	h, ok := singleHeader(r.Header, "Idempotency-Key")
	if !ok {
		return "", payment.Errorf(payment.CodeIdempotencyKeyInvalid, "send one Idempotency-Key header, not several")
	}
	key, err := idempotency.ParseKey(h)
	switch {
	case errors.Is(err, idempotency.ErrKeyMissing):
		return "", payment.Errorf(payment.CodeIdempotencyKeyMissing, "this request needs an Idempotency-Key header")
	case err != nil:
		return "", payment.Errorf(payment.CodeIdempotencyKeyInvalid, "the Idempotency-Key must be 1 to 255 visible ASCII characters")
	}
	logging.SetKeyHash(r.Context(), idempotency.HashKey(key))
	return key, nil
}

// mutation reads the key and the body of a payment operation, then runs it.
func (s *Server) mutation(w http.ResponseWriter, r *http.Request, optionalBody bool,
	run func(key string, body []byte) (idempotency.Answer, error)) {
	read := readJSON
	if optionalBody {
		read = readOptionalJSON
	}
	body, err := read(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp, err := run(key, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A crash here leaves a committed outcome and an unanswered client: the
	// retry must get the stored response.
	failpoint("before-response")
	s.writeStored(w, r, resp)
}

// writeStored writes an idempotent result: a replay is the stored answer,
// byte for byte, with the status of its kind. A stored refusal is rendered
// as problem+json like any other error.
func (s *Server) writeStored(w http.ResponseWriter, r *http.Request, ans idempotency.Answer) {
	h := w.Header()
	if ans.Replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	if ans.Kind == idempotency.KindRefused {
		e, err := payment.DecodeStoredError(ans.Body)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeError(w, r, e)
		return
	}
	status, ok := statusOfKind[ans.Kind]
	if !ok {
		s.writeError(w, r, fmt.Errorf("api: stored answer of unknown kind %q", ans.Kind))
		return
	}
	h.Set("Content-Type", "application/json")
	if ans.Kind == idempotency.KindAccepted {
		h.Set("Retry-After", retryAfterUnknown)
	}
	w.WriteHeader(status)
	_, _ = w.Write(ans.Body)
}

func (s *Server) createPayment(w http.ResponseWriter, r *http.Request) {
	s.mutation(w, r, false, func(key string, body []byte) (idempotency.Answer, error) {
		return s.payments.CreateBody(r.Context(), accountFrom(r).Merchant(), key, body)
	})
}

func (s *Server) getPayment(w http.ResponseWriter, r *http.Request) {
	p, err := s.payments.Get(r.Context(), accountFrom(r).ID, chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// list is the envelope of every list.
type list[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
}

const maxList = 100

func (s *Server) listPayments(w http.ResponseWriter, r *http.Request) {
	orderID := r.URL.Query().Get("order_id")
	if orderID == "" {
		s.writeError(w, r, &payment.Error{Code: payment.CodeInvalidRequest, Message: "order_id is required",
			Fields: []payment.FieldError{{Field: "order_id", Message: "is required"}}})
		return
	}
	limit, err := parseLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ps, err := s.payments.ListByOrder(r.Context(), accountFrom(r).ID, orderID, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(ps, limit))
}

// parseLimit reads ?limit=, 1 to 100, default 100.
func parseLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return maxList, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxList {
		return 0, &payment.Error{Code: payment.CodeInvalidRequest, Message: "limit must be 1 to 100",
			Fields: []payment.FieldError{{Field: "limit", Message: "must be 1 to 100"}}}
	}
	return n, nil
}

// page trims one row fetched past the limit into has_more.
func page[T any](rows []T, limit int) list[T] {
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	return list[T]{Object: "list", Data: rows, HasMore: more}
}
