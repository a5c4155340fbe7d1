package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/operations"
	"github.com/acmepay/payments/internal/payment"
	"github.com/go-chi/chi/v5"
)

type createAccountRequest struct {
	Name string `json:"name"`
	providerSecrets
}

// providerSecrets are provider credentials as the admin API spells them.
type providerSecrets struct {
	StripeSecretKey          string `json:"stripe_secret_key"`
	WebhookSecret            string `json:"webhook_secret"`
	MercadoPagoAccessToken   string `json:"mercadopago_access_token"`
	MercadoPagoWebhookSecret string `json:"mercadopago_webhook_secret"`
}

// secretFields skip the card-number check of the strict decoder.
var secretFields = []string{"stripe_secret_key", "webhook_secret", "mercadopago_access_token", "mercadopago_webhook_secret"}

func (p providerSecrets) secrets() account.Secrets {
	return account.Secrets{StripeSecret: p.StripeSecretKey, WebhookSecret: p.WebhookSecret,
		MercadoPagoToken: p.MercadoPagoAccessToken, MercadoPagoWebhookSecret: p.MercadoPagoWebhookSecret}
}

func (s *Server) createAccount(w http.ResponseWriter, r *http.Request) {
	body, err := readJSON(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req createAccountRequest
	if err := payment.DecodeStrict(body, &req, secretFields...); err != nil {
		s.writeError(w, r, err)
		return
	}
	a, apiKey, err := s.accounts.CreateWith(r.Context(), req.Name, req.secrets())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": a.ID, "api_key": apiKey})
}

// setProviderRequest replaces one provider's credentials; actor and reason
// are optional here (account changes need none) and go to the log.
type setProviderRequest struct {
	providerSecrets
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

func (s *Server) setAccountProvider(w http.ResponseWriter, r *http.Request) {
	body, err := readJSON(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req setProviderRequest
	if err := payment.DecodeStrict(body, &req, secretFields...); err != nil {
		s.writeError(w, r, err)
		return
	}
	if utf8.RuneCountInString(req.Actor) > maxActorLen || utf8.RuneCountInString(req.Reason) > maxReasonLen {
		s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, "actor is at most %d and reason at most %d characters", maxActorLen, maxReasonLen))
		return
	}
	id, name := chi.URLParam(r, "id"), chi.URLParam(r, "provider")
	if !payment.ValidText(id) {
		s.writeError(w, r, payment.ErrNotFound)
		return
	}
	sum, err := s.accounts.SetProvider(r.Context(), id, name, req.secrets())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "account provider credentials set", slog.String("account_id", id),
		slog.String("provider", name), slog.String("actor", req.Actor), slog.String("reason", req.Reason))
	writeJSON(w, http.StatusOK, sum)
}

// setRoutingRequest is an account's routing (CONTRACT §15); actor and
// reason are optional, as for provider credentials, and go to the log.
type setRoutingRequest struct {
	payment.RoutingBody
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

func (s *Server) setAccountRouting(w http.ResponseWriter, r *http.Request) {
	body, err := readJSON(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req setRoutingRequest
	if err := payment.DecodeStrict(body, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if utf8.RuneCountInString(req.Actor) > maxActorLen || utf8.RuneCountInString(req.Reason) > maxReasonLen {
		s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, "actor is at most %d and reason at most %d characters", maxActorLen, maxReasonLen))
		return
	}
	id := chi.URLParam(r, "id")
	if !payment.ValidText(id) {
		s.writeError(w, r, payment.ErrNotFound)
		return
	}
	rt, err := s.accounts.SetRouting(r.Context(), id, req.RoutingBody)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "account routing set", slog.String("account_id", id),
		slog.Int("rules", len(rt.Rules)), slog.String("default", strings.Join(rt.Default, ",")),
		slog.String("actor", req.Actor), slog.String("reason", req.Reason))
	writeJSON(w, http.StatusOK, rt)
}

func (s *Server) getAccountRouting(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !payment.ValidText(id) {
		s.writeError(w, r, payment.ErrNotFound)
		return
	}
	rt, err := s.accounts.Routing(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rt)
}

// adminAction is the body of mutating admin calls: who acts and why, both
// kept in the audit trail.
type adminAction struct {
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

// Limits of the audit fields, in characters.
const (
	maxActorLen  = 100
	maxReasonLen = 1000
)

// decodeAdminAction runs before anything is reserved or sent to the
// provider: an actor or reason the audit trail cannot store must never let
// the reconciler act and then fail to record what it did.
func decodeAdminAction(body []byte) (adminAction, error) {
	var a adminAction
	if err := payment.DecodeStrict(body, &a); err != nil {
		return a, err
	}
	return a, checkAdminAction(a)
}

// checkAdminAction checks the actor and reason of an admin call.
func checkAdminAction(a adminAction) error {
	var fe []payment.FieldError
	check := func(field, v string, max int) {
		switch {
		case strings.TrimSpace(v) == "":
			fe = append(fe, payment.FieldError{Field: field, Message: "is required"})
		case utf8.RuneCountInString(v) > max:
			fe = append(fe, payment.FieldError{Field: field, Message: fmt.Sprintf("must be at most %d characters", max)})
		}
	}
	check("actor", a.Actor, maxActorLen)
	check("reason", a.Reason, maxReasonLen)
	if len(fe) > 0 {
		return &payment.Error{Code: payment.CodeInvalidRequest, Message: "the body must have an actor and a reason", Fields: fe}
	}
	return nil
}

func (s *Server) adminListPayments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	statuses := []payment.Status{payment.StatusUnknown, payment.StatusProcessing}
	if v := q.Get("status"); v != "" {
		var err error
		if statuses, err = operations.ParseStatuses(v); err != nil {
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
	after, err := operations.ParseStuckCursor(q.Get("after"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ps, err := s.operations.ListStuck(r.Context(), "", statuses, olderThan, after, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	l := page(ps, limit)
	next := after
	if n := len(l.Data); n > 0 {
		next = operations.StuckCursor{UpdatedAt: l.Data[n-1].UpdatedAt, ID: l.Data[n-1].ID}
	}
	writeJSON(w, http.StatusOK, stuckList{list: l, NextCursor: next.String()})
}

// stuckList is a page of the stuck list; pass next_cursor as after for the
// next page.
type stuckList struct {
	list[operations.StuckPayment]
	NextCursor string `json:"next_cursor"`
}

func (s *Server) adminGetPayment(w http.ResponseWriter, r *http.Request) {
	v, err := s.operations.AdminGet(r.Context(), chi.URLParam(r, "id"))
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
	p, err := s.reconciler.Payment(r.Context(), chi.URLParam(r, "id"), act.Actor, act.Reason)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) adminReplay(w http.ResponseWriter, r *http.Request) {
	s.mutation(w, r, false, func(key string, body []byte) (idempotency.Answer, error) {
		act, err := decodeAdminAction(body)
		if err != nil {
			return idempotency.Answer{}, err
		}
		return s.operations.Replay(r.Context(), key, chi.URLParam(r, "id"), act.Actor, act.Reason)
	})
}
