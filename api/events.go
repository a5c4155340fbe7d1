package api

import (
	"encoding/json"
	"net/http"
)

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	limit, err := parseLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
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
