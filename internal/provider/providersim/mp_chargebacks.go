package providersim

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Things that happen at Mercado Pago without the service asking: a refund
// made in the seller's dashboard, and a chargeback and its decision.

// MPChargeback is a snapshot of a stored chargeback. Amount is in cents;
// CoverageApplied is nil until decided (true: in the seller's favour).
type MPChargeback struct {
	ID              string    `json:"id"`
	PaymentID       int64     `json:"payment_id"`
	Amount          int64     `json:"amount"`
	Reason          string    `json:"reason"`
	CoverageApplied *bool     `json:"coverage_applied"`
	Deadline        time.Time `json:"deadline"`
	Created         time.Time `json:"created"`
}

type mpChargeback struct {
	MPChargeback
	updated time.Time
}

// mpChargebackJSON is a chargeback as Mercado Pago serializes it.
type mpChargebackJSON struct {
	ID                        string  `json:"id"`
	Payments                  []int64 `json:"payments"`
	Currency                  string  `json:"currency"`
	Amount                    float64 `json:"amount"`
	Reason                    string  `json:"reason"`
	CoverageApplied           *bool   `json:"coverage_applied"`
	CoverageEligible          bool    `json:"coverage_elegible"`
	DocumentationRequired     bool    `json:"documentation_required"`
	DocumentationStatus       string  `json:"documentation_status"`
	DateDocumentationDeadline *string `json:"date_documentation_deadline"`
	DateCreated               *string `json:"date_created"`
	DateLastUpdated           *string `json:"date_last_updated"`
	LiveMode                  bool    `json:"live_mode"`
}

func (cb *mpChargeback) wire() *mpChargebackJSON {
	j := &mpChargebackJSON{ID: cb.ID, Payments: []int64{cb.PaymentID}, Currency: "BRL", Amount: float64(cb.Amount) / 100,
		Reason: cb.Reason, CoverageApplied: cb.CoverageApplied, CoverageEligible: true,
		DocumentationRequired: cb.CoverageApplied == nil, DocumentationStatus: "pending",
		DateCreated: mpTime(cb.Created), DateLastUpdated: mpTime(cb.updated)}
	if cb.CoverageApplied == nil {
		j.DateDocumentationDeadline = mpTime(cb.Deadline)
	} else {
		j.DocumentationStatus = "valid"
	}
	return j
}

// MPDashboardRefund refunds amount (cents) of an approved payment as the
// seller would in Mercado Pago's dashboard: no API request, no
// idempotency key. It sends payment.updated.
func (s *Server) MPDashboardRefund(id, amount int64) (MPPayment, error) {
	return s.mpTransition(id, func(a *account, p *mpPayment, now time.Time) error {
		if p.Status != "approved" || amount < 1 || amount > p.Amount-p.Refunded {
			return fmt.Errorf("%w: payment %d (%s, %d of %d refunded) cannot be refunded %d", ErrUnexpectedState,
				p.ID, p.Status, p.Refunded, p.Amount, amount)
		}
		s.mp.nextRef++
		p.refunds = append(p.refunds, &mpRefundJSON{ID: s.mp.nextRef, PaymentID: p.ID, Amount: float64(amount) / 100,
			Status: "approved", RefundMode: "standard", DateCreated: mpTime(now),
			Source: map[string]string{"type": "collector", "id": "sim", "name": "dashboard"}})
		p.Refunded += amount
		p.StatusDetail, p.updated = "partially_refunded", now
		if p.Refunded == p.Amount {
			p.Status, p.StatusDetail = "refunded", "refunded"
		}
		s.mpNotify(a, p, "payment.updated", now)
		return nil
	})
}

// MPPayBehind approves a cancelled or rejected payment in full, as if the
// customer had paid after the service gave up on it: the worst case the
// audit looks for. It sends payment.updated.
func (s *Server) MPPayBehind(id int64) (MPPayment, error) {
	return s.mpTransition(id, func(a *account, p *mpPayment, now time.Time) error {
		if p.Status != "cancelled" && p.Status != "rejected" {
			return mpUnexpected(p, "paid behind the service's back")
		}
		delete(a.mpAccount().waiting, p.ID)
		p.Status, p.StatusDetail, p.Captured, p.approved, p.updated = "approved", "accredited", true, now, now
		a.stats.Authorizations++
		s.mpNotify(a, p, "payment.updated", now)
		return nil
	})
}

// MPOpenChargeback opens a chargeback of amount (0: the whole payment) on
// an approved payment: the payment becomes charged_back/in_process, and a
// chargebacks notification and the payment's payment.updated are sent.
func (s *Server) MPOpenChargeback(id, amount int64, reason string) (MPChargeback, error) {
	var out MPChargeback
	_, err := s.mpTransition(id, func(a *account, p *mpPayment, now time.Time) error {
		if p.Status != "approved" {
			return mpUnexpected(p, "charged back")
		}
		if amount <= 0 {
			amount = p.Amount - p.Refunded
		}
		if reason == "" {
			reason = "fraud"
		}
		s.mp.nextCB++
		cb := &mpChargeback{MPChargeback: MPChargeback{ID: strconv.FormatInt(s.mp.nextCB, 10), PaymentID: p.ID, Amount: amount,
			Reason: reason, Deadline: now.Add(disputeEvidenceWindow).Truncate(time.Second), Created: now}, updated: now}
		m := a.mpAccount()
		m.chargebacks = append(m.chargebacks, cb)
		p.Status, p.StatusDetail, p.updated = "charged_back", "in_process", now
		s.mpNotifyTopic(a, p, mpTopicChargebacks, "chargebacks.created", cb.ID, now)
		s.mpNotify(a, p, "payment.updated", now)
		out = cb.MPChargeback
		return nil
	})
	return out, err
}

// MPDecideChargeback settles a chargeback: won (coverage applied, the
// payment charged_back/reimbursed) or lost (charged_back/settled). It
// sends the chargebacks notification and payment.updated.
func (s *Server) MPDecideChargeback(id string, won bool) (MPChargeback, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.accounts {
		if a.mp == nil {
			continue
		}
		for _, cb := range a.mp.chargebacks {
			if cb.ID != id {
				continue
			}
			if cb.CoverageApplied != nil {
				return cb.MPChargeback, fmt.Errorf("%w: chargeback %s is already decided", ErrUnexpectedState, id)
			}
			now := s.now()
			p := a.mp.payments[cb.PaymentID]
			cb.CoverageApplied, cb.updated = &won, now
			p.StatusDetail, p.updated = "settled", now
			if won {
				p.StatusDetail = "reimbursed"
			}
			s.mpNotifyTopic(a, p, mpTopicChargebacks, "chargebacks.updated", cb.ID, now)
			s.mpNotify(a, p, "payment.updated", now)
			return cb.MPChargeback, nil
		}
	}
	return MPChargeback{}, fmt.Errorf("%w: %s", ErrNoSuchDispute, id)
}

// mpChargebacks serves GET /v1/chargebacks/search: the token's
// chargebacks, of one payment_id when given, oldest first.
func (s *Server) mpChargebacks(a *account, c *call) result {
	pid := get(c.form, "payment_id")
	results := []*mpChargebackJSON{}
	for _, cb := range a.mpAccount().chargebacks {
		if pid == "" || strconv.FormatInt(cb.PaymentID, 10) == pid {
			results = append(results, cb.wire())
		}
	}
	return okResult(map[string]any{"paging": map[string]int{"total": len(results), "limit": 30, "offset": 0},
		"results": results})
}

// mpGetChargeback serves GET /v1/chargebacks/{id}.
func (s *Server) mpGetChargeback(a *account, c *call) result {
	for _, cb := range a.mpAccount().chargebacks {
		if cb.ID == c.id {
			return okResult(cb.wire())
		}
	}
	return mpFailed(http.StatusNotFound, "not_found", "Chargeback not found")
}

// mpChargebackRoutes mounts the controls of things done outside the API:
//
//	POST /_sim/mp/payments/{id}/dashboard-refund {"amount"}: a refund made in the dashboard
//	POST /_sim/mp/payments/{id}/pay-behind       approve a cancelled or rejected payment
//	POST /_sim/mp/payments/{id}/chargeback       {"amount","reason"} -> chargeback
//	POST /_sim/mp/chargebacks/{id}/decide        {"status":"won"|"lost"}
func (s *Server) mpChargebackRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /_sim/mp/payments/{id}/dashboard-refund", s.mpAmountControl(func(id int64, in amountJSON) (any, error) {
		return s.MPDashboardRefund(id, in.Amount)
	}))
	m.HandleFunc("POST /_sim/mp/payments/{id}/pay-behind", s.mpAmountControl(func(id int64, _ amountJSON) (any, error) {
		return s.MPPayBehind(id)
	}))
	m.HandleFunc("POST /_sim/mp/payments/{id}/chargeback", s.mpAmountControl(func(id int64, in amountJSON) (any, error) {
		return s.MPOpenChargeback(id, in.Amount, in.Reason)
	}))
	m.HandleFunc("POST /_sim/mp/chargebacks/{id}/decide", func(w http.ResponseWriter, r *http.Request) {
		var in amountJSON
		if !readJSON(w, r, &in) {
			return
		}
		if in.Status != "won" && in.Status != "lost" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "status: want won or lost"})
			return
		}
		cb, err := s.MPDecideChargeback(r.PathValue("id"), in.Status == "won")
		writeControl(w, cb, err)
	})
}

// mpAmountControl reads {"amount","reason"} for a payment's control.
func (s *Server) mpAmountControl(f func(id int64, in amountJSON) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in amountJSON
		if r.ContentLength != 0 && !readJSON(w, r, &in) {
			return
		}
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		out, err := f(id, in)
		writeControl(w, out, err)
	}
}

// writeControl answers a control: 404 for an unknown object, 409 for one
// whose state does not allow the change.
func writeControl(w http.ResponseWriter, out any, err error) {
	switch {
	case errors.Is(err, ErrNoSuchIntent), errors.Is(err, ErrNoSuchDispute):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, out)
	}
}
