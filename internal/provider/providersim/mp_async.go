package providersim

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// mpExpireDue cancels the token's unpaid Pix and Boleto whose
// date_of_expiration has passed, as Mercado Pago does: cancelled/expired.
// Requires s.mu.
func (s *Server) mpExpireDue(a *account, now time.Time) {
	if a.mp == nil || len(a.mp.waiting) == 0 {
		return
	}
	var due []*mpPayment
	for _, p := range a.mp.waiting {
		if !now.Before(*p.Expires) {
			due = append(due, p)
		}
	}
	slices.SortFunc(due, func(x, y *mpPayment) int { return x.Expires.Compare(*y.Expires) })
	for _, p := range due {
		s.mpExpire(a, p, now)
	}
}

func (s *Server) mpExpire(a *account, p *mpPayment, now time.Time) {
	delete(a.mp.waiting, p.ID)
	p.Status, p.StatusDetail, p.updated = "cancelled", "expired", now
	a.stats.Declines++
	s.mpNotify(a, p, "payment.updated", now)
}

// MPPay plays the customer's part on a Mercado Pago payment: approves the
// 3-D Secure challenge (the card's cardholder name then decides), pays a
// Pix or Boleto, or settles a pending_contingency card as approved.
func (s *Server) MPPay(id int64) (MPPayment, error) {
	return s.mpTransition(id, func(a *account, p *mpPayment, now time.Time) error {
		switch {
		case p.Status != "pending":
			return mpUnexpected(p, "paid")
		case p.StatusDetail == "pending_challenge":
			s.mpDecide(a, p, now)
		case p.PaymentTypeID == "credit_card":
			p.holder = "APRO" // a contingency that clears
			s.mpDecide(a, p, now)
		default:
			// Pix and Boleto are paid in full; capture does not apply.
			delete(a.mp.waiting, p.ID)
			p.Status, p.StatusDetail, p.Captured, p.approved, p.updated = "approved", "accredited", true, now, now
			a.stats.Authorizations++
		}
		s.mpNotify(a, p, "payment.updated", now)
		return nil
	})
}

// MPFail fails the 3-D Secure challenge (rejected
// cc_rejected_3ds_challenge) or a pending_contingency card (rejected
// cc_rejected_other_reason).
func (s *Server) MPFail(id int64) (MPPayment, error) {
	return s.mpTransition(id, func(a *account, p *mpPayment, now time.Time) error {
		switch p.StatusDetail {
		case "pending_challenge":
			p.StatusDetail = "cc_rejected_3ds_challenge"
		case "pending_contingency":
			p.StatusDetail = "cc_rejected_other_reason"
		default:
			return mpUnexpected(p, "failed")
		}
		p.Status, p.updated = "rejected", now
		a.stats.Declines++
		s.mpNotify(a, p, "payment.updated", now)
		return nil
	})
}

// MPExpire expires an unpaid Pix or Boleto now, whatever its
// date_of_expiration.
func (s *Server) MPExpire(id int64) (MPPayment, error) {
	return s.mpTransition(id, func(a *account, p *mpPayment, now time.Time) error {
		if a.mp.waiting[p.ID] == nil {
			return mpUnexpected(p, "expired")
		}
		s.mpExpire(a, p, now)
		return nil
	})
}

func mpUnexpected(p *mpPayment, verb string) error {
	return fmt.Errorf("%w: payment %d (%s %s/%s) cannot be %s", ErrUnexpectedState, p.ID, p.PaymentMethodID, p.Status, p.StatusDetail, verb)
}

// mpTransition applies a customer-side change to a payment of any access
// token, after expiring what is due.
func (s *Server) mpTransition(id int64, change func(*account, *mpPayment, time.Time) error) (MPPayment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, p := s.findMPPayment(id)
	if p == nil {
		return MPPayment{}, fmt.Errorf("%w: %d", ErrNoSuchIntent, id)
	}
	now := s.now()
	s.expireDue(a, now)
	err := change(a, p, now)
	return p.snapshot(), err
}

// findMPPayment finds a payment among all access tokens. Requires s.mu.
func (s *Server) findMPPayment(id int64) (*account, *mpPayment) {
	for _, a := range s.accounts {
		if a.mp != nil && a.mp.payments[id] != nil {
			return a, a.mp.payments[id]
		}
	}
	return nil, nil
}

// MPPayments returns a copy of the access token's payments in creation
// order.
func (s *Server) MPPayments(accessToken string) []MPPayment {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[accessToken]
	if a == nil || a.mp == nil {
		return nil
	}
	out := make([]MPPayment, len(a.mp.order))
	for i, p := range a.mp.order {
		out[i] = p.snapshot()
	}
	return out
}

// mpControlRoutes mounts the Mercado Pago control API:
//
//	GET  /_sim/mp/payments?access_token=   payments of one token
//	POST /_sim/mp/payments/{id}/pay        approve 3-D Secure, pay a Pix or Boleto
//	POST /_sim/mp/payments/{id}/fail       fail 3-D Secure
//	POST /_sim/mp/payments/{id}/expire     expire a Pix or Boleto now
//	POST /_sim/mp/settings                 {"key_retention":"1h","search_lag":"30s"} (each optional)
//
// the changes made outside the API (mpChargebackRoutes), and the pages a customer visits: GET/POST /_sim/mp/3ds/{id},
// GET/POST /_sim/mp/pix/{id}, GET /_sim/mp/boleto/{id}.
func (s *Server) mpControlRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /_sim/mp/payments", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.MPPayments(r.URL.Query().Get("access_token")))
	})
	m.HandleFunc("POST /_sim/mp/payments/{id}/pay", s.mpControl(s.MPPay))
	m.HandleFunc("POST /_sim/mp/payments/{id}/fail", s.mpControl(s.MPFail))
	m.HandleFunc("POST /_sim/mp/payments/{id}/expire", s.mpControl(s.MPExpire))
	m.HandleFunc("POST /_sim/mp/settings", s.mpSettingsControl)
	s.mpChargebackRoutes(m)
	m.HandleFunc("GET /_sim/mp/3ds/{id}", s.mpPage("credit_card", mpChallengePage))
	m.HandleFunc("POST /_sim/mp/3ds/{id}", s.mpPageAction("credit_card"))
	m.HandleFunc("GET /_sim/mp/pix/{id}", s.mpPage("bank_transfer", mpPixPage))
	m.HandleFunc("POST /_sim/mp/pix/{id}", s.mpPageAction("bank_transfer"))
	m.HandleFunc("GET /_sim/mp/boleto/{id}", s.mpPage("ticket", mpBoletoPage))
}

// mpSettingsControl serves POST /_sim/mp/settings.
func (s *Server) mpSettingsControl(w http.ResponseWriter, r *http.Request) {
	var in struct {
		KeyRetention *string `json:"key_retention"`
		SearchLag    *string `json:"search_lag"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	parse := func(v *string) (time.Duration, bool) {
		if v == nil {
			return 0, false
		}
		d, err := time.ParseDuration(*v)
		return d, err == nil && d >= 0
	}
	retention, setR := parse(in.KeyRetention)
	lag, setL := parse(in.SearchLag)
	if (in.KeyRetention != nil && !setR) || (in.SearchLag != nil && !setL) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want non-negative durations such as 1h"})
		return
	}
	if setR {
		s.SetMPKeyRetention(retention)
	}
	if setL {
		s.SetMPSearchLag(lag)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) mpControl(f func(int64) (MPPayment, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		p, err := f(id)
		switch {
		case errors.Is(err, ErrNoSuchIntent):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		case err != nil:
			writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "payment": p})
		default:
			writeJSON(w, http.StatusOK, p)
		}
	}
}

// mpView is what a hosted page shows of a payment.
type mpView struct {
	ID, Status, Amount, QRCode, Barcode, Expires string
	CallbackURL                                  string // where the challenge sends the customer back
	QRImage                                      template.URL
	Waiting                                      bool
}

// mpViewOf resolves a hosted page's payment of the given type.
func (s *Server) mpViewOf(r *http.Request, typeID string) (mpView, bool) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	a, p := s.findMPPayment(id)
	if p == nil || p.PaymentTypeID != typeID {
		return mpView{}, false
	}
	s.expireDue(a, s.now())
	v := mpView{ID: strconv.FormatInt(id, 10), Status: p.Status + "/" + p.StatusDetail, Amount: formatAmount(p.Amount, "BRL"),
		QRCode: p.qrCode, Barcode: p.barcode, CallbackURL: p.req.CallbackURL, QRImage: template.URL("data:image/png;base64," + p.qrBase64),
		Waiting: p.Status == "pending" && p.StatusDetail != "pending_contingency"}
	if p.Expires != nil {
		v.Expires = p.Expires.In(saoPaulo).Format("2006-01-02 15:04:05 -07:00")
	}
	return v, true
}

func (s *Server) mpPage(typeID string, t *template.Template) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok := s.mpViewOf(r, typeID)
		if !ok {
			http.Error(w, "no such payment", http.StatusNotFound)
			return
		}
		render(w, t, v)
	}
}

// mpPageAction handles the pages' buttons: approve (or pay) and fail; then
// the customer goes back to the payment's callback_url, if any.
func (s *Server) mpPageAction(typeID string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok := s.mpViewOf(r, typeID)
		if !ok {
			http.Error(w, "no such payment", http.StatusNotFound)
			return
		}
		id, _ := strconv.ParseInt(v.ID, 10, 64)
		switch r.PostFormValue("action") {
		case "approve", "pay":
			s.MPPay(id)
		case "fail":
			s.MPFail(id)
		default:
			http.Error(w, "action: want approve, pay or fail", http.StatusBadRequest)
			return
		}
		after, _ := s.mpViewOf(r, typeID)
		if after.CallbackURL != "" {
			http.Redirect(w, r, after.CallbackURL, http.StatusSeeOther)
			return
		}
		render(w, mpDonePage, after)
	}
}

var mpChallengePage = template.Must(template.New("mp3ds").Parse(`{{define "title"}}3-D Secure{{end}}` + pageHead + `
<h1>3-D Secure test challenge</h1>
<p>Payment <code>{{.ID}}</code> of <strong>{{.Amount}}</strong>.</p>
{{if .Waiting}}
<form method="post"><input type="hidden" name="action" value="approve"><button id="approve" type="submit">Approve</button></form>
<form method="post"><input type="hidden" name="action" value="fail"><button id="fail" type="submit">Fail</button></form>
{{else}}<p id="status">This challenge is over: the payment is {{.Status}}.</p>{{end}}
</body></html>`))

var mpPixPage = template.Must(template.New("mppix").Parse(`{{define "title"}}Pix{{end}}` + pageHead + `
<h1>Pay {{.Amount}} with Pix</h1>
{{if .Waiting}}
<p><img id="qr" src="{{.QRImage}}" alt="Pix QR code" width="256" height="256"></p>
<p>Or copy the code: <code id="data">{{.QRCode}}</code></p>
<p>Expires at {{.Expires}}.</p>
<form method="post"><input type="hidden" name="action" value="pay"><button id="pay" type="submit">Pay (test)</button></form>
{{else}}<p id="status">This Pix can no longer be paid: the payment is {{.Status}}.</p>{{end}}
</body></html>`))

var mpBoletoPage = template.Must(template.New("mpboleto").Parse(`{{define "title"}}Boleto{{end}}` + pageHead + `
<h1>Boleto of {{.Amount}}</h1>
<p>Number: <code id="number">{{.Barcode}}</code></p>
<p>Due: {{.Expires}}. <span id="status">The payment is {{.Status}}.</span></p>
</body></html>`))

var mpDonePage = template.Must(template.New("mpdone").Parse(`{{define "title"}}Done{{end}}` + pageHead + `
<p id="status">Payment <code>{{.ID}}</code> is {{.Status}}. You may close this window.</p></body></html>`))
