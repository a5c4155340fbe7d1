package providersim

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	qrcode "github.com/skip2/go-qrcode"
)

// mpCheck validates a create request and types the payment method; a bad
// request is answered 400 and not kept for its key.
func mpCheck(in *mpCreateJSON) (typeID string, bad *result) {
	reject := func(msg string) (string, *result) {
		res := mpRejected(http.StatusBadRequest, "bad_request", msg)
		return "", &res
	}
	switch {
	case cents(in.TransactionAmount) <= 0:
		return reject("transaction_amount must be positive")
	case in.Payer.Email == "":
		return reject("payer.email must not be null")
	case in.PaymentMethodID == "":
		return reject("payment_method_id must not be null")
	}
	switch in.PaymentMethodID {
	case "pix":
		return "bank_transfer", nil
	case "bolbradesco":
		digits := strings.Map(keepDigit, in.Payer.Identification.Number)
		if in.Payer.FirstName == "" || in.Payer.LastName == "" || (len(digits) != 11 && len(digits) != 14) {
			return reject("bolbradesco needs payer.first_name, payer.last_name and a CPF or CNPJ in payer.identification")
		}
		return "ticket", nil
	}
	if _, _, ok := mpCardToken(in.Token); !ok {
		res := mpRejected(http.StatusBadRequest, "bad_request", "Invalid card_token_id",
			mpCauseJSON{Code: 2006, Description: "Card Token not found"})
		return "", &res
	}
	return "credit_card", nil
}

// mpCreate serves POST /v1/payments.
func (s *Server) mpCreate(a *account, c *call) result {
	var in mpCreateJSON
	if res := decodeBody(c, &in); res != nil {
		return *res
	}
	typeID, bad := mpCheck(&in)
	if bad != nil {
		return *bad
	}
	if in.Installments == 0 {
		in.Installments = 1
	}
	s.mp.nextID++
	p := &mpPayment{req: in, updated: c.now, MPPayment: MPPayment{ID: s.mp.nextID, Amount: cents(in.TransactionAmount),
		PaymentMethodID: in.PaymentMethodID, PaymentTypeID: typeID, ExternalReference: in.ExternalReference,
		IdempotencyKey: c.idemKey, Created: c.now}}
	m := a.mpAccount()
	m.payments[p.ID] = p
	m.order = append(m.order, p)
	id := strconv.FormatInt(p.ID, 10)
	switch typeID {
	case "credit_card":
		holder, challenge, _ := mpCardToken(in.Token)
		p.holder = holder
		if challenge && in.ThreeDSecureMode == "optional" {
			p.Status, p.StatusDetail, p.challenged = "pending", "pending_challenge", true
			p.resource = c.base + "/_sim/mp/3ds/" + id
		} else {
			s.mpDecide(a, p, c.now)
		}
	case "bank_transfer":
		s.mpStartPix(m, p, c)
	case "ticket":
		exp := time.Date(c.now.Year(), c.now.Month(), c.now.Day()+3, 23, 59, 59, 0, saoPaulo)
		p.Expires, p.barcode = &exp, boletoNumber()
		if in.DateOfExpiration != nil {
			p.Expires = in.DateOfExpiration
		}
		p.Status, p.StatusDetail, p.resource = "pending", "pending_waiting_payment", c.base+"/_sim/mp/boleto/"+id
		m.waiting[p.ID] = p
	}
	s.mpNotify(a, p, "payment.created", c.now)
	return jsonResult(http.StatusCreated, p.wire(), true)
}

// mpStartPix makes the QR code of a Pix, due in 24h unless the request
// says when.
func (s *Server) mpStartPix(m *mpAccount, p *mpPayment, c *call) {
	id := strconv.FormatInt(p.ID, 10)
	exp := c.now.Add(24 * time.Hour)
	if p.req.DateOfExpiration != nil {
		exp = *p.req.DateOfExpiration
	}
	p.Expires = &exp
	p.qrCode = brCode("sim-"+id+"@providersim.test", p.Amount, "MP"+id)
	if png, err := qrcode.Encode(p.qrCode, qrcode.Medium, 256); err == nil {
		p.qrBase64 = base64.StdEncoding.EncodeToString(png)
	}
	p.Status, p.StatusDetail, p.resource = "pending", "pending_waiting_transfer", c.base+"/_sim/mp/pix/"+id
	m.waiting[p.ID] = p
}

// mpDecide settles a card payment by its cardholder name: approved (or
// authorized when the request said "capture":false), pending or rejected.
// Requires s.mu.
func (s *Server) mpDecide(a *account, p *mpPayment, now time.Time) {
	out := mpCardOutcomes[p.holder]
	p.Status, p.StatusDetail, p.updated = out[0], out[1], now
	switch {
	case p.Status == "approved" && p.req.Capture != nil && !*p.req.Capture:
		p.Status, p.StatusDetail = "authorized", "pending_capture"
		a.stats.Authorizations++
	case p.Status == "approved":
		p.Captured, p.approved = true, now
		a.stats.Authorizations++
	case p.Status == "rejected":
		a.stats.Declines++
	}
}

// mpUpdate serves PUT /v1/payments/{id}: {"capture":true} with an optional
// transaction_amount, or {"status":"cancelled"}.
func (s *Server) mpUpdate(a *account, c *call) result {
	p, res := a.mpPaymentOf(c)
	if res != nil {
		return *res
	}
	var in struct {
		Status            string   `json:"status"`
		Capture           *bool    `json:"capture"`
		TransactionAmount *float64 `json:"transaction_amount"`
	}
	if res := decodeBody(c, &in); res != nil {
		return *res
	}
	switch {
	case in.Status == "cancelled":
		return s.mpCancel(a, p, c.now)
	case in.Capture != nil && *in.Capture:
		return s.mpCapture(a, p, in.TransactionAmount, c.now)
	}
	return mpRejected(http.StatusBadRequest, "bad_request", `the simulator updates a payment only with {"capture":true} or {"status":"cancelled"}`)
}

// mpCancel cancels a payment that is pending, in process or authorized; an
// approved payment must be refunded instead.
func (s *Server) mpCancel(a *account, p *mpPayment, now time.Time) result {
	if p.Status != "pending" && p.Status != "in_process" && p.Status != "authorized" {
		return mpFailed(http.StatusBadRequest, "bad_request", "Invalid status update: a payment in status "+p.Status+" cannot be cancelled",
			mpCauseJSON{Code: 2063, Description: "Invalid status update"})
	}
	delete(a.mpAccount().waiting, p.ID)
	p.Status, p.StatusDetail, p.updated = "cancelled", "by_collector", now
	a.stats.Cancels++
	s.mpNotify(a, p, "payment.updated", now)
	return okResult(p.wire())
}

// mpCapture captures an authorized payment, in full or in part.
func (s *Server) mpCapture(a *account, p *mpPayment, amount *float64, now time.Time) result {
	if p.Status != "authorized" {
		return mpFailed(http.StatusBadRequest, "bad_request", "Payment status is "+p.Status+", only authorized payments can be captured",
			mpCauseJSON{Code: 2024, Description: "Payment not capturable"})
	}
	if amount != nil {
		c := cents(*amount)
		if c <= 0 || c > p.Amount {
			return mpRejected(http.StatusBadRequest, "bad_request", "transaction_amount must be positive and at most the authorized amount")
		}
		p.Amount = c
	}
	p.Status, p.StatusDetail, p.Captured, p.approved, p.updated = "approved", "accredited", true, now, now
	a.stats.Captures++
	s.mpNotify(a, p, "payment.updated", now)
	return okResult(p.wire())
}

// mpRefund serves POST /v1/payments/{id}/refunds: in full without an
// amount, else in part. Refunds are approved at once.
func (s *Server) mpRefund(a *account, c *call) result {
	p, res := a.mpPaymentOf(c)
	if res != nil {
		return *res
	}
	var in struct {
		Amount *float64 `json:"amount"`
	}
	if res := decodeBody(c, &in); res != nil {
		return *res
	}
	if p.Status != "approved" {
		return mpFailed(http.StatusBadRequest, "bad_request", "Payment status is "+p.Status+", only approved payments can be refunded",
			mpCauseJSON{Code: 2085, Description: "Invalid payment status"})
	}
	amount := p.Amount - p.Refunded
	if in.Amount != nil {
		amount = cents(*in.Amount)
	}
	if amount <= 0 || amount > p.Amount-p.Refunded {
		return mpRejected(http.StatusBadRequest, "bad_request", "amount must be positive and at most what is left to refund")
	}
	s.mp.nextRef++
	r := &mpRefundJSON{ID: s.mp.nextRef, PaymentID: p.ID, Amount: float64(amount) / 100, Status: "approved",
		RefundMode: "standard", DateCreated: mpTime(c.now), Source: map[string]string{"type": "collector", "id": "sim", "name": "providersim"}}
	p.refunds = append(p.refunds, r)
	p.Refunded += amount
	p.StatusDetail, p.updated = "partially_refunded", c.now
	if p.Refunded == p.Amount {
		p.Status, p.StatusDetail = "refunded", "refunded"
	}
	a.stats.Refunds++
	s.mpNotify(a, p, "payment.updated", c.now)
	return jsonResult(http.StatusCreated, r, true)
}

// mpListRefunds serves GET /v1/payments/{id}/refunds.
func (s *Server) mpListRefunds(a *account, c *call) result {
	p, res := a.mpPaymentOf(c)
	if res != nil {
		return *res
	}
	out := p.refunds
	if out == nil {
		out = []*mpRefundJSON{}
	}
	return okResult(out)
}
