package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/payment"
	"github.com/go-chi/chi/v5"
)

type createAccountRequest struct {
	Name            string `json:"name"`
	StripeSecretKey string `json:"stripe_secret_key"`
	WebhookSecret   string `json:"webhook_secret"`
}

func (s *Server) createAccount(w http.ResponseWriter, r *http.Request) {
	body, err := readJSON(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req createAccountRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, "the body must be {name, stripe_secret_key, webhook_secret?}"))
		return
	}
	a, apiKey, err := s.accounts.Create(r.Context(), req.Name, req.StripeSecretKey, req.WebhookSecret)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": a.ID, "api_key": apiKey})
}

// adminAction is the body of mutating admin calls: who acts and why, both
// kept in the audit trail.
type adminAction struct {
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

func decodeAdminAction(body []byte) (adminAction, error) {
	var a adminAction
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&a)
	var fe []payment.FieldError
	if strings.TrimSpace(a.Actor) == "" {
		fe = append(fe, payment.FieldError{Field: "actor", Message: "is required"})
	}
	if strings.TrimSpace(a.Reason) == "" {
		fe = append(fe, payment.FieldError{Field: "reason", Message: "is required"})
	}
	if err != nil || len(fe) > 0 {
		return a, &payment.Error{Code: payment.CodeInvalidRequest, Message: "the body must be {actor, reason}", Fields: fe}
	}
	return a, nil
}

func (s *Server) adminListPayments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	statuses := []payment.Status{payment.StatusUnknown, payment.StatusProcessing}
	if v := q.Get("status"); v != "" {
		var err error
		if statuses, err = payment.ParseStatuses(v); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	var olderThan time.Duration
	if v := q.Get("older_than"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			s.writeError(w, r, &payment.Error{Code: payment.CodeInvalidRequest, Message: "older_than must be a Go duration such as 5m",
				Fields: []payment.FieldError{{Field: "older_than", Message: "must be a Go duration such as 5m"}}})
			return
		}
		olderThan = d
	}
	limit, err := parseLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	after, err := payment.ParseStuckCursor(q.Get("after"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ps, err := s.payments.ListStuck(r.Context(), statuses, olderThan, after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	l := page(ps, limit)
	next := after
	if n := len(l.Data); n > 0 {
		next = payment.StuckCursor{UpdatedAt: l.Data[n-1].UpdatedAt, ID: l.Data[n-1].ID}
	}
	writeJSON(w, http.StatusOK, stuckList{list: l, NextCursor: next.String()})
}

// stuckList is a page of the stuck list; pass next_cursor as after for the
// next page.
type stuckList struct {
	list[payment.StuckPayment]
	NextCursor string `json:"next_cursor"`
}

func (s *Server) adminGetPayment(w http.ResponseWriter, r *http.Request) {
	v, err := s.payments.AdminGet(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) adminReconcile(w http.ResponseWriter, r *http.Request) {
	body, err := readJSON(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	act, err := decodeAdminAction(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.payments.ReconcilePayment(r.Context(), s.accounts, chi.URLParam(r, "id"), act.Actor, act.Reason)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) adminReplay(w http.ResponseWriter, r *http.Request) {
	s.mutation(w, r, false, func(key string, body []byte) (idempotency.Response, error) {
		act, err := decodeAdminAction(body)
		if err != nil {
			return idempotency.Response{}, err
		}
		return s.payments.Replay(r.Context(), s.accounts, key, chi.URLParam(r, "id"), act.Actor, act.Reason)
	})
}
