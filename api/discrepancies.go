package api

import (
	"net/http"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/payment"
	"github.com/go-chi/chi/v5"
)

// discrepancyList is a page of discrepancies; pass next_cursor back as
// cursor for the next one, as with the events feed.
type discrepancyList struct {
	list[*payment.Discrepancy]
	NextCursor string `json:"next_cursor"`
}

func (s *Server) adminListDiscrepancies(w http.ResponseWriter, r *http.Request) {
	limit, err := parseLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	pg, err := s.operations.ListDiscrepancies(r.Context(), payment.DiscrepancyStatus(q.Get("status")), q.Get("payment_id"), q.Get("cursor"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, discrepancyList{
		list:       list[*payment.Discrepancy]{Object: "list", Data: pg.Data, HasMore: pg.HasMore},
		NextCursor: pg.NextCursor,
	})
}

func (s *Server) adminGetDiscrepancy(w http.ResponseWriter, r *http.Request) {
	d, err := s.operations.GetDiscrepancy(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// resolveRequest is {actor, reason, action}.
type resolveRequest struct {
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
	Action string `json:"action"`
}

func (s *Server) adminResolveDiscrepancy(w http.ResponseWriter, r *http.Request) {
	s.mutation(w, r, false, func(key string, body []byte) (idempotency.Answer, error) {
		var req resolveRequest
		if err := payment.DecodeStrict(body, &req); err != nil {
			return idempotency.Answer{}, err
		}
		if err := checkAdminAction(adminAction{Actor: req.Actor, Reason: req.Reason}); err != nil {
			return idempotency.Answer{}, err
		}
		return s.operations.Resolve(r.Context(), key, chi.URLParam(r, "id"), operations.ResolveRequest{
			Actor: req.Actor, Reason: req.Reason, Action: payment.ResolveAction(req.Action)})
	})
}
