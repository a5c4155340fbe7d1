package api

import (
	"bytes"
	"net/http"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/payment"
	"github.com/go-chi/chi/v5"
	"github.com/go-json-experiment/json/jsontext"
)

// amountBody is the body of capture ({amount?}) and refunds ({amount}).
type amountBody struct {
	Amount jsontext.Value `json:"amount"`
}

// readOptionalJSON reads a body that may be absent: capture and cancel can
// be sent with no body at all.
func readOptionalJSON(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
		return nil, nil
	}
	return readJSON(w, r)
}

// decodeAmount decodes {amount?}; required says whether it must be there.
func decodeAmount(body []byte, required bool) (int64, error) {
	var b amountBody
	if len(bytes.TrimSpace(body)) > 0 {
		if err := payment.DecodeStrict(body, &b); err != nil {
			return 0, err
		}
	}
	if b.Amount == nil {
		if required {
			return 0, &payment.Error{Code: payment.CodeInvalidRequest, Message: "amount is required",
				Fields: []payment.FieldError{{Field: "amount", Message: "is required"}}}
		}
		return 0, nil
	}
	n, ok := payment.ParseAmount(b.Amount)
	if !ok {
		return 0, &payment.Error{Code: payment.CodeInvalidRequest, Message: "the request has invalid fields",
			Fields: []payment.FieldError{{Field: "amount", Message: "must be an integer from 1 to 99999999 (minor units)"}}}
	}
	return n, nil
}

func (s *Server) capturePayment(w http.ResponseWriter, r *http.Request) {
	s.mutation(w, r, true, func(key string, body []byte) (idempotency.Answer, error) {
		amount, err := decodeAmount(body, false)
		if err != nil {
			return idempotency.Answer{}, err
		}
		return s.payments.Capture(r.Context(), accountFrom(r).Merchant(), key, chi.URLParam(r, "id"), amount)
	})
}

func (s *Server) cancelPayment(w http.ResponseWriter, r *http.Request) {
	s.mutation(w, r, true, func(key string, body []byte) (idempotency.Answer, error) {
		if len(bytes.TrimSpace(body)) > 0 {
			if err := payment.DecodeStrict(body, &struct{}{}); err != nil {
				return idempotency.Answer{}, err
			}
		}
		return s.payments.Cancel(r.Context(), accountFrom(r).Merchant(), key, chi.URLParam(r, "id"))
	})
}

func (s *Server) createRefund(w http.ResponseWriter, r *http.Request) {
	s.mutation(w, r, false, func(key string, body []byte) (idempotency.Answer, error) {
		amount, err := decodeAmount(body, true)
		if err != nil {
			return idempotency.Answer{}, err
		}
		return s.payments.Refund(r.Context(), accountFrom(r).Merchant(), key, chi.URLParam(r, "id"), amount)
	})
}

func (s *Server) getRefund(w http.ResponseWriter, r *http.Request) {
	rf, err := s.payments.GetRefund(r.Context(), accountFrom(r).ID, chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rf)
}

// listRefunds pages a payment's refunds oldest first, after the refund id
// in starting_after, as the webhook endpoints list pages by id.
func (s *Server) listRefunds(w http.ResponseWriter, r *http.Request) {
	limit, err := parseLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rs, err := s.payments.ListRefunds(r.Context(), accountFrom(r).ID, chi.URLParam(r, "id"),
		r.URL.Query().Get("starting_after"), limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(rs, limit))
}
