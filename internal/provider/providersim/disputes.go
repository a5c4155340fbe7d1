package providersim

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Things that happen at the provider without the service asking, so the
// audit of final payments has something to find: a refund made in the
// dashboard, a dispute (chargeback) and its life, an intent paid after the
// service gave up on it, a captured amount that differs from the service's.

// ErrNoSuchDispute is returned for an unknown dispute id.
var ErrNoSuchDispute = errors.New("providersim: no such dispute")

// disputeEvidenceWindow is how long the merchant has to answer a dispute.
const disputeEvidenceWindow = 7 * 24 * time.Hour

// Dispute is a snapshot of a stored dispute.
type Dispute struct {
	ID            string    `json:"id"`
	IntentID      string    `json:"payment_intent"`
	Charge        string    `json:"charge"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	Reason        string    `json:"reason"`
	Status        string    `json:"status"` // needs_response, under_review, won, lost, …
	EvidenceDueBy time.Time `json:"evidence_due_by"`
	Created       time.Time `json:"created"`
}

type dispute struct{ Dispute }

// disputeJSON is a Dispute as Stripe serializes it.
type disputeJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	Charge             string            `json:"charge"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	EvidenceDetails    evidenceDetails   `json:"evidence_details"`
	IsChargeRefundable bool              `json:"is_charge_refundable"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	PaymentIntent      string            `json:"payment_intent"`
	Reason             string            `json:"reason"`
	Status             string            `json:"status"`
}

type evidenceDetails struct {
	DueBy           int64 `json:"due_by"`
	HasEvidence     bool  `json:"has_evidence"`
	PastDue         bool  `json:"past_due"`
	SubmissionCount int   `json:"submission_count"`
}

func (d *dispute) wire() *disputeJSON {
	return &disputeJSON{ID: d.ID, Object: "dispute", Amount: d.Amount, Charge: d.Charge, Created: d.Created.Unix(),
		Currency: d.Currency, EvidenceDetails: evidenceDetails{DueBy: d.EvidenceDueBy.Unix()},
		Metadata: map[string]string{}, PaymentIntent: d.IntentID, Reason: d.Reason, Status: d.Status}
}

// chargeJSON is the part of a Charge that charge.refunded carries.
type chargeJSON struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	Amount         int64  `json:"amount"`
	AmountCaptured int64  `json:"amount_captured"`
	AmountRefunded int64  `json:"amount_refunded"`
	Currency       string `json:"currency"`
	PaymentIntent  string `json:"payment_intent"`
	Refunded       bool   `json:"refunded"`
}

// DashboardRefund refunds amount of a succeeded intent as a person in the
// provider's dashboard would: no API request, no idempotency key, no
// metadata. It sends charge.refunded.
func (s *Server) DashboardRefund(intentID string, amount int64) (Intent, error) {
	return s.transition(intentID, func(a *account, pi *intentRecord, now time.Time) error {
		if pi.Status != "succeeded" || amount < 1 || amount > pi.AmountReceived-pi.AmountRefunded {
			return fmt.Errorf("%w: intent %s (%s, %d of %d refunded) cannot be refunded %d", ErrUnexpectedState,
				pi.ID, pi.Status, pi.AmountRefunded, pi.AmountReceived, amount)
		}
		rf := &refund{ID: newID("re_", 24), Object: "refund", Amount: amount, Charge: pi.LatestCharge,
			Created: now.Unix(), Currency: pi.Currency, Metadata: map[string]string{}, PaymentIntent: pi.ID, Status: "succeeded"}
		a.refunds[rf.ID] = rf
		a.refundOrder = append(a.refundOrder, rf)
		pi.AmountRefunded += amount
		s.emitObject(a, "charge.refunded", pi, &chargeJSON{ID: pi.LatestCharge, Object: "charge", Amount: pi.Amount,
			AmountCaptured: pi.AmountReceived, AmountRefunded: pi.AmountRefunded, Currency: pi.Currency,
			PaymentIntent: pi.ID, Refunded: pi.AmountRefunded == pi.AmountReceived}, now)
		return nil
	})
}

// OpenDispute opens a dispute of amount (0: the whole captured amount) on
// a succeeded intent, in status needs_response with evidence due in seven
// days, and sends charge.dispute.created.
func (s *Server) OpenDispute(intentID string, amount int64, reason string) (Dispute, error) {
	var out Dispute
	_, err := s.transition(intentID, func(a *account, pi *intentRecord, now time.Time) error {
		if pi.Status != "succeeded" {
			return unexpected(pi, "disputed")
		}
		if amount <= 0 {
			amount = pi.AmountReceived
		}
		if reason == "" {
			reason = "fraudulent"
		}
		d := &dispute{Dispute{ID: newID("dp_", 24), IntentID: pi.ID, Charge: pi.LatestCharge, Amount: amount,
			Currency: pi.Currency, Reason: reason, Status: "needs_response",
			EvidenceDueBy: now.Add(disputeEvidenceWindow).Truncate(time.Second), Created: now}}
		a.disputes = append(a.disputes, d)
		s.emitObject(a, "charge.dispute.created", pi, d.wire(), now)
		out = d.Dispute
		return nil
	})
	return out, err
}

// UpdateDispute moves an open dispute to status (under_review, say) and
// sends charge.dispute.updated.
func (s *Server) UpdateDispute(id, status string) (Dispute, error) {
	return s.changeDispute(id, status, "charge.dispute.updated")
}

// CloseDispute settles a dispute as won or lost and sends
// charge.dispute.closed.
func (s *Server) CloseDispute(id, status string) (Dispute, error) {
	if status != "won" && status != "lost" {
		return Dispute{}, fmt.Errorf("%w: a dispute closes as won or lost, not %q", ErrUnexpectedState, status)
	}
	return s.changeDispute(id, status, "charge.dispute.closed")
}

func (s *Server) changeDispute(id, status, event string) (Dispute, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.accounts {
		for _, d := range a.disputes {
			if d.ID != id {
				continue
			}
			if d.Status == "won" || d.Status == "lost" {
				return d.Dispute, fmt.Errorf("%w: dispute %s is already %s", ErrUnexpectedState, id, d.Status)
			}
			d.Status = status
			s.emitObject(a, event, a.intents[d.IntentID], d.wire(), s.now())
			return d.Dispute, nil
		}
	}
	return Dispute{}, fmt.Errorf("%w: %s", ErrNoSuchDispute, id)
}

// PayBehind charges an intent that is not paid (canceled, or back to
// requires_payment_method after a decline) in full, as if the customer had
// paid it after the service gave up: the worst case the audit looks for.
// It sends payment_intent.succeeded.
func (s *Server) PayBehind(intentID string) (Intent, error) {
	return s.transition(intentID, func(a *account, pi *intentRecord, now time.Time) error {
		if pi.Status == "succeeded" || pi.Status == "requires_capture" {
			return unexpected(pi, "paid behind the service's back")
		}
		delete(a.waiting, pi.ID)
		pi.Status, pi.AmountReceived, pi.AmountCapturable = "succeeded", pi.Amount, 0
		pi.canceledAt, pi.cancellationReason, pi.lastError = time.Time{}, "", nil
		pi.nextAction, pi.NextActionType = nil, ""
		if pi.LatestCharge == "" {
			pi.LatestCharge = newID("ch_", 24)
		}
		a.stats.Authorizations++
		s.emit(a, "payment_intent.succeeded", pi, now)
		return nil
	})
}

// ForgetIntent drops an intent, its refunds and its disputes, as a
// provider that never had it would show (a restarted simulator, or a key of
// another account): retrieve and search find nothing.
func (s *Server) ForgetIntent(intentID string) (Intent, error) {
	return s.transition(intentID, func(a *account, pi *intentRecord, now time.Time) error {
		delete(a.intents, pi.ID)
		delete(a.waiting, pi.ID)
		a.order = slices.DeleteFunc(a.order, func(o *intentRecord) bool { return o == pi })
		for id, rf := range a.refunds {
			if rf.PaymentIntent == pi.ID {
				delete(a.refunds, id)
			}
		}
		a.refundOrder = slices.DeleteFunc(a.refundOrder, func(rf *refund) bool { return rf.PaymentIntent == pi.ID })
		a.disputes = slices.DeleteFunc(a.disputes, func(d *dispute) bool { return d.IntentID == pi.ID })
		return nil
	})
}

// SetAmountReceived changes what a succeeded intent shows as captured,
// without an event: a captured amount that differs from the service's.
func (s *Server) SetAmountReceived(intentID string, amount int64) (Intent, error) {
	return s.transition(intentID, func(a *account, pi *intentRecord, now time.Time) error {
		if pi.Status != "succeeded" || amount < pi.AmountRefunded || amount > pi.Amount {
			return unexpected(pi, fmt.Sprintf("shown as %d captured", amount))
		}
		pi.AmountReceived = amount
		return nil
	})
}

// Disputes returns the disputes of one secret key, oldest first.
func (s *Server) Disputes(secretKey string) []Dispute {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Dispute
	if a := s.accounts[secretKey]; a != nil {
		for _, d := range a.disputes {
			out = append(out, d.Dispute)
		}
	}
	return out
}

// listDisputes implements GET /v1/disputes: the account's disputes,
// optionally of one payment_intent, newest first, in one page.
func (s *Server) listDisputes(a *account, c *call) result {
	limit, sent, perr := positiveInt(c.form, "limit")
	switch {
	case perr != nil || limit > 100:
		return rejected(&apiError{Type: invalidRequest, Code: "parameter_invalid_integer", Param: "limit", Message: "Invalid limit: must be between 1 and 100."})
	case !sent:
		limit = 10
	}
	piID := get(c.form, "payment_intent")
	if piID != "" && a.intents[piID] == nil {
		return notFound("payment_intent", "payment_intent", piID)
	}
	out := struct {
		Object  string         `json:"object"`
		Data    []*disputeJSON `json:"data"`
		HasMore bool           `json:"has_more"`
		URL     string         `json:"url"`
	}{Object: "list", Data: []*disputeJSON{}, URL: "/v1/disputes"}
	for i := len(a.disputes) - 1; i >= 0; i-- {
		d := a.disputes[i]
		if piID != "" && d.IntentID != piID {
			continue
		}
		if int64(len(out.Data)) == limit {
			out.HasMore = true
			break
		}
		out.Data = append(out.Data, d.wire())
	}
	return okResult(out)
}

type amountJSON struct {
	Amount int64  `json:"amount"`
	Reason string `json:"reason"`
	Status string `json:"status"`
}

// disputeRoutes mounts the control endpoints that plant discrepancies.
func (s *Server) disputeRoutes(m *http.ServeMux) {
	intentCall := func(f func(id string, in amountJSON) (any, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var in amountJSON
			if r.ContentLength != 0 && !readJSON(w, r, &in) {
				return
			}
			out, err := f(r.PathValue("id"), in)
			switch {
			case errors.Is(err, ErrNoSuchIntent), errors.Is(err, ErrNoSuchDispute):
				writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			case err != nil:
				writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
			default:
				writeJSON(w, http.StatusOK, out)
			}
		}
	}
	m.HandleFunc("POST /_sim/intents/{id}/dashboard-refund", intentCall(func(id string, in amountJSON) (any, error) {
		return s.DashboardRefund(id, in.Amount)
	}))
	m.HandleFunc("POST /_sim/intents/{id}/dispute", intentCall(func(id string, in amountJSON) (any, error) {
		return s.OpenDispute(id, in.Amount, in.Reason)
	}))
	m.HandleFunc("POST /_sim/intents/{id}/pay-behind", intentCall(func(id string, _ amountJSON) (any, error) {
		return s.PayBehind(id)
	}))
	m.HandleFunc("POST /_sim/intents/{id}/forget", intentCall(func(id string, _ amountJSON) (any, error) {
		return s.ForgetIntent(id)
	}))
	m.HandleFunc("POST /_sim/intents/{id}/amount-received", intentCall(func(id string, in amountJSON) (any, error) {
		return s.SetAmountReceived(id, in.Amount)
	}))
	m.HandleFunc("POST /_sim/disputes/{id}/update", intentCall(func(id string, in amountJSON) (any, error) {
		return s.UpdateDispute(id, in.Status)
	}))
	m.HandleFunc("POST /_sim/disputes/{id}/close", intentCall(func(id string, in amountJSON) (any, error) {
		return s.CloseDispute(id, in.Status)
	}))
}
