package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/acmepay/payments/internal/notify"
	"github.com/acmepay/payments/internal/payment"
	"github.com/go-chi/chi/v5"
)

// Webhook endpoints of the merchant (CONTRACT §13).

func (s *Server) createWebhookEndpoint(w http.ResponseWriter, r *http.Request) {
	key, err := idempotencyKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := readJSON(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req notify.EndpointRequest
	if err := payment.DecodeStrict(body, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	e, replayed, err := s.webhooks.Create(r.Context(), accountFrom(r).ID, key, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusCreated, e.View())
}

func (s *Server) listWebhookEndpoints(w http.ResponseWriter, r *http.Request) {
	limit, err := parseLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	es, err := s.webhooks.List(r.Context(), accountFrom(r).ID, r.URL.Query().Get("starting_after"), limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views := make([]any, len(es))
	for i, e := range es {
		views[i] = e.View()
	}
	writeJSON(w, http.StatusOK, page(views, limit))
}

func (s *Server) getWebhookEndpoint(w http.ResponseWriter, r *http.Request) {
	e, err := s.webhooks.Get(r.Context(), accountFrom(r).ID, chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e.View())
}

func (s *Server) updateWebhookEndpoint(w http.ResponseWriter, r *http.Request) {
	body, err := readJSON(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req notify.EndpointRequest
	if err := payment.DecodeStrict(body, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	e, err := s.webhooks.Update(r.Context(), accountFrom(r).ID, chi.URLParam(r, "id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e.View())
}

func (s *Server) deleteWebhookEndpoint(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := s.webhooks.Delete(r.Context(), accountFrom(r).ID, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "webhook_endpoint", "deleted": true})
}

func (s *Server) rotateWebhookSecret(w http.ResponseWriter, r *http.Request) {
	key, err := idempotencyKey(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	e, err := s.webhooks.RotateSecret(r.Context(), accountFrom(r).ID, chi.URLParam(r, "id"), key)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e.View())
}

// parseAfterID reads ?starting_after= of the attempt lists: an attempt id.
func parseAfterID(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("starting_after")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &payment.Error{Code: payment.CodeInvalidRequest, Message: "starting_after must be an attempt id",
			Fields: []payment.FieldError{{Field: "starting_after", Message: "must be an attempt id"}}}
	}
	return n, nil
}

// attemptsFor lists the delivery attempts of the path's endpoint or event,
// after the attempt id in starting_after.
type attemptsFor func(ctx context.Context, id string, after int64, limit int) ([]notify.Attempt, error)

func (s *Server) listAttempts(w http.ResponseWriter, r *http.Request, list attemptsFor) {
	limit, err := parseLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	after, err := parseAfterID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	as, err := list(r.Context(), chi.URLParam(r, "id"), after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views := make([]any, len(as))
	for i, a := range as {
		views[i] = a.View()
	}
	writeJSON(w, http.StatusOK, page(views, limit))
}

func (s *Server) listEndpointDeliveries(w http.ResponseWriter, r *http.Request) {
	account := accountFrom(r).ID
	s.listAttempts(w, r, func(ctx context.Context, id string, after int64, limit int) ([]notify.Attempt, error) {
		return s.webhooks.Deliveries(ctx, account, id, after, limit)
	})
}

func (s *Server) listEventDeliveries(w http.ResponseWriter, r *http.Request) {
	account := accountFrom(r).ID
	s.listAttempts(w, r, func(ctx context.Context, id string, after int64, limit int) ([]notify.Attempt, error) {
		return s.webhooks.EventDeliveries(ctx, account, id, after, limit)
	})
}

func (s *Server) redeliverEvent(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := s.webhooks.Redeliver(r.Context(), accountFrom(r).ID, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"id": id, "object": "event", "redelivery": "enqueued"})
}

// Admin equivalents, across accounts. Secrets are never shown.

// endpointCursors is the codec of the admin endpoint list's cursor.
var endpointCursors = payment.IDCursor("webhook_endpoint", "cursor")

// endpointList is a page of the admin endpoint list; pass next_cursor back
// as cursor for the next one.
type endpointList struct {
	list[any]
	NextCursor string `json:"next_cursor"`
}

func (s *Server) adminListWebhookEndpoints(w http.ResponseWriter, r *http.Request) {
	limit, err := parseLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	cursor := q.Get("cursor")
	after, err := endpointCursors.Decode(cursor)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	es, err := s.webhooks.AdminList(r.Context(), q.Get("account_id"), after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views := make([]any, len(es))
	for i, e := range es {
		views[i] = e.AdminView()
	}
	l := page(views, limit)
	if n := len(l.Data); n > 0 {
		cursor = endpointCursors.Encode(es[n-1].ID)
	}
	writeJSON(w, http.StatusOK, endpointList{list: l, NextCursor: cursor})
}

func (s *Server) adminListEndpointDeliveries(w http.ResponseWriter, r *http.Request) {
	s.listAttempts(w, r, s.webhooks.AdminDeliveries)
}

func (s *Server) adminListEventDeliveries(w http.ResponseWriter, r *http.Request) {
	s.listAttempts(w, r, s.webhooks.AdminEventDeliveries)
}

func (s *Server) adminRedeliverEvent(w http.ResponseWriter, r *http.Request) {
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
	id := chi.URLParam(r, "id")
	accountID, err := s.webhooks.AdminRedeliver(r.Context(), id, act.Actor, act.Reason)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"id": id, "object": "event", "account_id": accountID, "redelivery": "enqueued"})
}
