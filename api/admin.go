package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/acmepay/payments/internal/payment"
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
