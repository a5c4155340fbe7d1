package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/acmepay/payments/internal/account"
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
// only names a payment: the payment is retrieved from Mercado Pago and
// what the retrieved object shows is applied. A retrieve that fails is a
// 503 with no receipt, so Mercado Pago delivers the notification again.
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
	body, release, err := s.readBudgeted(w, r, maxWebhookBody)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	note, dataID, ok := mpVerified(r, body, acct)
	if !ok {
		s.metrics.Webhook("rejected")
		s.log.WarnContext(r.Context(), "webhook signature rejected", slog.String("account_id", acct.ID), slog.String("provider", "mercadopago"))
		s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, mpWebhookRefused))
		return
	}
	n, err := s.mpEvent(r.Context(), acct.Merchant(), note, dataID, r.Header.Get("x-request-id"))
	if err != nil {
		s.log.WarnContext(r.Context(), "webhook payment retrieve failed", slog.String("account_id", acct.ID),
			slog.String("provider", "mercadopago"), slog.String("error", err.Error()))
		s.writeError(w, r, payment.Errorf(payment.CodeUnavailable, "the payment could not be retrieved from Mercado Pago; retry later"))
		return
	}
	if !eventIsText(n) {
		s.writeError(w, r, payment.Errorf(payment.CodeInvalidRequest, "the event holds text that is not valid UTF-8 or has NUL characters"))
		return
	}
	outcome, err := s.inbound.Receive(r.Context(), acct.Merchant(), n)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.Webhook(outcome)
	s.log.InfoContext(r.Context(), "webhook", slog.String("account_id", acct.ID), slog.String("provider", "mercadopago"),
		slog.String("event_id", n.EventID), slog.String("type", n.Type), slog.String("outcome", outcome))
	writeJSON(w, http.StatusOK, map[string]any{"received": true, "outcome": outcome})
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

// mpEvent builds the event a verified notification stands for. A payment
// notification becomes the retrieved payment; any other topic is an
// ignored receipt named by the delivery's x-request-id.
//
// A payment event's id is "mp:<data.id>:<retrieved state>": Mercado Pago
// sends several notifications about one change (payment.created, then
// payment.updated, and redeliveries with a fresh x-request-id each), and
// all of them retrieve the same state, so they are one receipt; a later
// status change retrieves another state and is applied.
func (s *Server) mpEvent(ctx context.Context, m payment.Account, note mercadopago.Notification, dataID, requestID string) (provider.Event, error) {
	if note.Type != "payment" {
		return provider.Event{EventID: "mp:" + note.Type + ":" + requestID, Type: note.Type + "." + note.Action, Kind: provider.EventOther}, nil
	}
	b, err := s.payments.ProviderFor(m, payment.ProviderMercadoPago)
	if err != nil {
		return provider.Event{}, err
	}
	in, err := b.Provider.RetrieveIntent(ctx, b.Credentials, dataID)
	if errors.Is(err, provider.ErrNotFound) {
		return provider.Event{EventID: "mp:" + dataID + ":not_found", Type: note.Action, Kind: provider.EventOther}, nil
	}
	if err != nil {
		return provider.Event{}, err
	}
	if note.Action == "" {
		note.Action = note.Type
	}
	n := provider.Event{EventID: "mp:" + in.ID + ":" + string(in.State) + ":" + in.FailureCode, Type: note.Action, Kind: provider.EventIntent,
		Intent: in, IntentID: in.ID}
	if in.State == provider.IntentNeedsPaymentMethod && in.FailureCode != "" {
		n.Kind, n.FailureCode, n.FailureMessage = provider.EventIntentFailed, in.FailureCode, in.FailureMessage
	}
	return n, nil
}
