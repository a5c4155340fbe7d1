package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/acmepay/payments/internal/payment"
)

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	limit := maxList
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxList {
			s.writeError(w, r, &payment.Error{Code: payment.CodeInvalidRequest, Message: "limit must be 1 to 100",
				Fields: []payment.FieldError{{Field: "limit", Message: "must be 1 to 100"}}})
			return
		}
		limit = n
	}
	page, err := s.payments.Events(r.Context(), accountFrom(r).ID, r.URL.Query().Get("after"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Object     string            `json:"object"`
		Data       []json.RawMessage `json:"data"`
		HasMore    bool              `json:"has_more"`
		NextCursor string            `json:"next_cursor"`
	}{"list", page.Events, page.HasMore, page.NextCursor})
}
