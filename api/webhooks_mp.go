package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/inbound"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/mercadopago"
	"github.com/go-chi/chi/v5"
)

// mpWebhookRefused answers every notification that cannot be verified,
// for the same reason as webhookRefused.
const mpWebhookRefused = "the notification's x-signature could not be verified"

// mercadoPagoWebhook takes a Mercado Pago notification with the rules of
// stripeWebhook (400 and nothing stored unless verified, the account looked
// up before the body is read, the body within the byte budget). The body
// only names a payment or a chargeback: it is retrieved from Mercado Pago
// and what the retrieved objects show is applied. A retrieve that fails is
// a 503 with no receipt, so Mercado Pago delivers the notification again.
func (s *Server) mercadoPagoWebhook(w http.ResponseWriter, r *http.Request) {
	acct, err := s.accounts.Get(r.Context(), chi.URLParam(r, "account_id"))
	if payment.ErrorCode(err) == payment.CodeNotFound || (err == nil && acct.MercadoPagoWebhookSecret == "") {
		s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, mpWebhookRefused))
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
	note, dataID, ok := mpVerified(r, body, acct)
	if !ok {
		s.metrics.Webhook(payment.ProviderMercadoPago, "rejected")
		s.log.WarnContext(r.Context(), "webhook signature rejected", slog.String("account_id", acct.ID), slog.String("provider", "mercadopago"))
		s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, mpWebhookRefused))
		return
	}
	evs, err := s.mpEvents(r.Context(), acct.Merchant(), note, dataID, r.Header.Get("x-request-id"))
	if err != nil {
		s.log.WarnContext(r.Context(), "webhook retrieve failed", slog.String("account_id", acct.ID),
			slog.String("provider", "mercadopago"), slog.String("error", err.Error()))
		s.writeError(w, r, payment.Errorf(payment.CodeUnavailable, "the notified object could not be retrieved from Mercado Pago; retry later"))
		return
	}
	for _, n := range evs {
		if !eventIsText(n) {
			s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, "the event holds text that is not valid UTF-8 or has NUL characters"))
			return
		}
	}
	outcome, err := s.receiveAll(r.Context(), acct.Merchant(), evs)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.Webhook(payment.ProviderMercadoPago, outcome)
	writeJSON(w, http.StatusOK, map[string]any{"received": true, "outcome": outcome})
}

// receiveAll receives the events one notification stands for, in order
// (the payment's state before its refunds and chargebacks), each with its
// own receipt. The notification's outcome is applied when any event was,
// duplicate when all were, else the first other outcome.
func (s *Server) receiveAll(ctx context.Context, m payment.Account, evs []provider.Event) (string, error) {
	outcome := inbound.Duplicate
	for _, n := range evs {
		o, err := s.inbound.Receive(ctx, m, n)
		if err != nil {
			return "", err
		}
		s.log.InfoContext(ctx, "webhook", slog.String("account_id", m.ID), slog.String("provider", "mercadopago"),
			slog.String("event_id", n.EventID), slog.String("type", n.Type), slog.String("outcome", o))
		switch {
		case outcome == inbound.Applied:
		case o == inbound.Applied, outcome == inbound.Duplicate:
			outcome = o
		}
	}
	return outcome, nil
}

// mpVerified reads the notification and checks its signature. data.id is
// the query's (where Mercado Pago puts the id it signs) or else the body's;
// both present and different is refused, since only one was signed.
func mpVerified(r *http.Request, body []byte, acct account.Account) (mercadopago.Notification, string, bool) {
	note, err := mercadopago.ParseNotification(body)
	if err != nil {
		return note, "", false
	}
	dataID := note.DataID()
	if q := r.URL.Query().Get("data.id"); q != "" {
		if dataID != "" && dataID != q {
			return note, "", false
		}
		dataID = q
	}
	err = mercadopago.VerifySignature(r.Header.Get("x-signature"), r.Header.Get("x-request-id"), dataID,
		acct.MercadoPagoWebhookSecret, time.Now())
	return note, dataID, err == nil
}

// mpEvents builds the events a verified notification stands for. A
// payment or chargeback notification becomes what Mercado Pago shows of
// the object when retrieved (mercadopago.NotifiedEvents: the event ids
// name the retrieved state, so the several notifications Mercado Pago
// sends about one change, and their redeliveries with a fresh
// x-request-id each, are one receipt, and a later change is another);
// any other topic is an ignored receipt named by the delivery's
// x-request-id.
func (s *Server) mpEvents(ctx context.Context, m payment.Account, note mercadopago.Notification, dataID, requestID string) ([]provider.Event, error) {
	if !mercadopago.ReadsTopic(note.Type) {
		return []provider.Event{{EventID: "mp:" + note.Type + ":" + requestID, Type: note.Type + "." + note.Action, Kind: provider.EventOther}}, nil
	}
	b, err := s.payments.ProviderFor(m, payment.ProviderMercadoPago)
	if err != nil {
		return nil, err
	}
	nf, ok := b.Provider.(provider.Notified)
	if !ok {
		return nil, errors.New("the Mercado Pago provider cannot read notifications")
	}
	return nf.NotifiedEvents(ctx, b.Credentials, note.Type, note.Action, dataID)
}
