package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
	"github.com/go-chi/chi/v5"
)

// maxWebhookBody bounds a provider event.
const maxWebhookBody = 1 << 20

// webhookRefused is the one answer to an event that cannot be verified,
// whether the account is unknown, has no webhook secret or the signature
// is wrong: the answer must not tell which accounts exist.
const webhookRefused = "the event's Stripe-Signature could not be verified"

// stripeWebhook takes a provider event: a bad signature or an unknown
// account is a 400 and nothing is stored; anything verified is a 200, also a
// redelivery, a stale event or one about an object the service does not
// know. It never answers 409: it waits for the payment's lock instead.
// Requests cost nothing before they are known to be for an account with a
// webhook secret: the account is looked up before a byte of the body is
// read, and bodies are read within the server's byte budget (503 beyond).
func (s *Server) stripeWebhook(w http.ResponseWriter, r *http.Request) {
	acct, err := s.accounts.Get(r.Context(), chi.URLParam(r, "account_id"))
	if payment.ErrorCode(err) == payment.CodeNotFound || (err == nil && acct.WebhookSecret == "") {
		s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, webhookRefused))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	logging.SetAccount(r.Context(), acct.ID)
	body, release, err := s.readBudgeted(w, r, maxWebhookBody)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	n, err := s.inbound.Parse(body, r.Header.Get("Stripe-Signature"), acct.WebhookSecret)
	if errors.Is(err, provider.ErrSignature) {
		s.metrics.Webhook(payment.ProviderStripe, "rejected")
		s.log.WarnContext(r.Context(), "webhook signature rejected", slog.String("account_id", acct.ID))
		s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, webhookRefused))
		return
	}
	if err != nil {
		s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, "the event could not be read"))
		return
	}
	// Signed is not the same as storable: text PostgreSQL cannot take would
	// fail the receipt with a 500 on every redelivery.
	if !eventIsText(n) {
		s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, "the event holds text that is not valid UTF-8 or has NUL characters"))
		return
	}
	outcome, err := s.inbound.Receive(r.Context(), acct.Merchant(), n)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.Webhook(payment.ProviderStripe, outcome)
	s.log.InfoContext(r.Context(), "webhook", slog.String("account_id", acct.ID), slog.String("event_id", n.EventID),
		slog.String("type", n.Type), slog.String("outcome", outcome))
	writeJSON(w, http.StatusOK, map[string]any{"received": true, "outcome": outcome})
}

// eventIsText reports whether every string of a verified event that the
// service stores or compares is text PostgreSQL can take.
func eventIsText(n provider.Event) bool {
	texts := []string{n.EventID, n.Type, n.IntentID, n.FailureCode, n.FailureMessage}
	if in := n.Intent; in != nil {
		texts = append(texts, in.ID, in.Currency, in.CaptureMethod)
		for k, v := range in.Metadata {
			texts = append(texts, k, v)
		}
	}
	if d := n.Dispute; d != nil {
		texts = append(texts, d.ID, d.IntentID, d.Reason, d.Status)
	}
	for _, t := range texts {
		if !payment.ValidText(t) {
			return false
		}
	}
	return true
}
