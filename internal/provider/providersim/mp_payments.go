package providersim

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MPPayment is a snapshot of a stored Mercado Pago payment. Amounts are in
// cents.
type MPPayment struct {
	ID                int64      `json:"id"`
	Status            string     `json:"status"` // pending, authorized, in_process, approved, rejected, cancelled, refunded
	StatusDetail      string     `json:"status_detail"`
	Amount            int64      `json:"amount"`
	Refunded          int64      `json:"refunded"`
	Captured          bool       `json:"captured"`
	PaymentMethodID   string     `json:"payment_method_id"` // visa, master, pix, bolbradesco, ...
	PaymentTypeID     string     `json:"payment_type_id"`   // credit_card, bank_transfer, ticket
	ExternalReference string     `json:"external_reference,omitempty"`
	IdempotencyKey    string     `json:"idempotency_key,omitempty"` // of the request that created it
	Created           time.Time  `json:"created"`
	Expires           *time.Time `json:"expires,omitempty"` // Pix and Boleto
}

type mpPayment struct {
	MPPayment
	req        mpCreateJSON
	holder     string // the test card's cardholder name
	updated    time.Time
	approved   time.Time
	qrCode     string
	qrBase64   string
	resource   string // ticket_url, Boleto voucher or 3-D Secure challenge URL
	barcode    string
	refunds    []*mpRefundJSON
	challenged bool
}

// mpCreateJSON is the part of a create request the simulator reads.
type mpCreateJSON struct {
	TransactionAmount float64        `json:"transaction_amount"`
	Token             string         `json:"token"`
	Description       string         `json:"description"`
	Installments      int            `json:"installments"`
	PaymentMethodID   string         `json:"payment_method_id"`
	ExternalReference string         `json:"external_reference"`
	NotificationURL   string         `json:"notification_url"`
	CallbackURL       string         `json:"callback_url"`
	ThreeDSecureMode  string         `json:"three_d_secure_mode"`
	Capture           *bool          `json:"capture"`
	DateOfExpiration  *time.Time     `json:"date_of_expiration"`
	Metadata          map[string]any `json:"metadata"`
	Payer             struct {
		Email          string `json:"email"`
		FirstName      string `json:"first_name"`
		LastName       string `json:"last_name"`
		Identification struct {
			Type   string `json:"type"`
			Number string `json:"number"`
		} `json:"identification"`
	} `json:"payer"`
}

// mpCardOutcomes are Mercado Pago's test cardholder names and what a card
// payment with each becomes.
var mpCardOutcomes = map[string][2]string{
	"APRO": {"approved", "accredited"},
	"OTHE": {"rejected", "cc_rejected_other_reason"},
	"CONT": {"pending", "pending_contingency"},
	"CALL": {"rejected", "cc_rejected_call_for_authorize"},
	"FUND": {"rejected", "cc_rejected_insufficient_amount"},
	"SECU": {"rejected", "cc_rejected_bad_filled_security_code"},
	"EXPI": {"rejected", "cc_rejected_bad_filled_date"},
	"FORM": {"rejected", "cc_rejected_bad_filled_other"},
}

// mpCardToken reads a test token: tok_<NAME>, or tok_3DS_<NAME> for a card
// that asks for a 3-D Secure challenge when three_d_secure_mode is optional.
func mpCardToken(token string) (holder string, challenge, ok bool) {
	rest, ok := strings.CutPrefix(token, "tok_")
	if !ok {
		return "", false, false
	}
	rest, challenge = strings.CutPrefix(rest, "3DS_")
	if challenge && rest == "" {
		rest = "APRO"
	}
	_, ok = mpCardOutcomes[rest]
	return rest, challenge, ok
}

func cents(v float64) int64 { return int64(math.Round(v * 100)) }

func mpTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.In(saoPaulo).Format("2006-01-02T15:04:05.000-07:00")
	return &s
}

// mpPaymentJSON is a payment as Mercado Pago serializes it (the fields the
// sdk-go payment.Response reads that matter here).
type mpPaymentJSON struct {
	ID                        int64                `json:"id"`
	DateCreated               *string              `json:"date_created"`
	DateApproved              *string              `json:"date_approved"`
	DateLastUpdated           *string              `json:"date_last_updated"`
	DateOfExpiration          *string              `json:"date_of_expiration"`
	OperationType             string               `json:"operation_type"`
	PaymentMethodID           string               `json:"payment_method_id"`
	PaymentTypeID             string               `json:"payment_type_id"`
	Status                    string               `json:"status"`
	StatusDetail              string               `json:"status_detail"`
	CurrencyID                string               `json:"currency_id"`
	Description               string               `json:"description"`
	ExternalReference         string               `json:"external_reference"`
	NotificationURL           string               `json:"notification_url"`
	CallbackURL               string               `json:"callback_url"`
	TransactionAmount         float64              `json:"transaction_amount"`
	TransactionAmountRefunded float64              `json:"transaction_amount_refunded"`
	Installments              int                  `json:"installments"`
	Captured                  bool                 `json:"captured"`
	LiveMode                  bool                 `json:"live_mode"`
	Metadata                  map[string]any       `json:"metadata"`
	Payer                     map[string]any       `json:"payer"`
	Card                      map[string]any       `json:"card"`
	PointOfInteraction        map[string]any       `json:"point_of_interaction"`
	TransactionDetails        map[string]any       `json:"transaction_details"`
	ThreeDSInfo               map[string]string    `json:"three_ds_info,omitempty"`
	Refunds                   []*mpRefundJSON      `json:"refunds"`
	FeeDetails                []map[string]float64 `json:"fee_details"`
}

// mpRefundJSON is a refund as Mercado Pago serializes it.
type mpRefundJSON struct {
	ID                   int64             `json:"id"`
	PaymentID            int64             `json:"payment_id"`
	Amount               float64           `json:"amount"`
	Status               string            `json:"status"`
	RefundMode           string            `json:"refund_mode"`
	DateCreated          *string           `json:"date_created"`
	Source               map[string]string `json:"source"`
	UniqueSequenceNumber *string           `json:"unique_sequence_number"`
}

func (p *mpPayment) wire() *mpPaymentJSON {
	j := &mpPaymentJSON{ID: p.ID, DateCreated: mpTime(p.Created), DateApproved: mpTime(p.approved),
		DateLastUpdated: mpTime(p.updated), OperationType: "regular_payment",
		PaymentMethodID: p.PaymentMethodID, PaymentTypeID: p.PaymentTypeID, Status: p.Status,
		StatusDetail: p.StatusDetail, CurrencyID: "BRL", Description: p.req.Description,
		ExternalReference: p.ExternalReference, NotificationURL: p.req.NotificationURL, CallbackURL: p.req.CallbackURL,
		TransactionAmount: float64(p.Amount) / 100, TransactionAmountRefunded: float64(p.Refunded) / 100,
		Installments: p.req.Installments, Captured: p.Captured, Metadata: p.req.Metadata,
		Payer:              map[string]any{"email": p.req.Payer.Email, "identification": p.req.Payer.Identification},
		PointOfInteraction: map[string]any{}, Refunds: p.refunds, FeeDetails: []map[string]float64{},
		TransactionDetails: map[string]any{"total_paid_amount": float64(p.Amount) / 100,
			"net_received_amount": 0, "installment_amount": float64(p.Amount) / 100},
	}
	if j.Metadata == nil {
		j.Metadata = map[string]any{}
	}
	if p.Expires != nil {
		j.DateOfExpiration = mpTime(*p.Expires)
	}
	switch p.PaymentTypeID {
	case "credit_card":
		j.Card = map[string]any{"cardholder": map[string]any{"name": p.holder}, "last_four_digits": "0604",
			"first_six_digits": "503143", "expiration_month": 11, "expiration_year": 2030}
		if p.challenged {
			j.ThreeDSInfo = map[string]string{"external_resource_url": p.resource, "creq": "creq_" + strconv.FormatInt(p.ID, 10)}
		}
	case "bank_transfer":
		j.PointOfInteraction = map[string]any{"type": "PIX", "transaction_data": map[string]any{
			"qr_code": p.qrCode, "qr_code_base64": p.qrBase64, "ticket_url": p.resource}}
	case "ticket":
		j.TransactionDetails["external_resource_url"] = p.resource
		j.TransactionDetails["barcode"] = map[string]string{"content": p.barcode}
		j.TransactionDetails["digitable_line"] = p.barcode
	}
	return j
}

func (p *mpPayment) snapshot() MPPayment { return p.MPPayment }

// mpPaymentOf resolves the {id} of a payments route. Requires s.mu.
func (a *account) mpPaymentOf(c *call) (*mpPayment, *result) {
	id, err := strconv.ParseInt(c.id, 10, 64)
	p := a.mpAccount().payments[id]
	if err != nil || p == nil {
		res := mpFailed(http.StatusNotFound, "not_found", "Payment not found", mpCauseJSON{Code: 2000, Description: "Payment not found"})
		return nil, &res
	}
	return p, nil
}

// mpGet serves GET /v1/payments/{id}.
func (s *Server) mpGet(a *account, c *call) result {
	p, res := a.mpPaymentOf(c)
	if res != nil {
		return *res
	}
	return okResult(p.wire())
}

// mpSearch serves GET /v1/payments/search: payments of the token at least
// the search lag old, filtered by external_reference and by range
// (date_created, date_last_updated or date_approved between begin_date and
// end_date) when given, by creation (criteria=desc: newest first), paged
// by limit (default 30, at most 1000) and offset, with paging.total.
func (s *Server) mpSearch(a *account, c *call) result {
	q := c.form
	limit, offset := 30, 0
	if v, err := strconv.Atoi(get(q, "limit")); err == nil && v > 0 {
		limit = min(v, 1000)
	}
	if v, err := strconv.Atoi(get(q, "offset")); err == nil && v >= 0 {
		offset = v
	}
	inRange, ok := mpDateRange(q)
	if !ok {
		return mpRejected(http.StatusBadRequest, "bad_request", "invalid range, begin_date or end_date")
	}
	ref, byRef := q["external_reference"]
	var found []*mpPaymentJSON
	for _, p := range a.mpAccount().order {
		if c.now.Sub(p.Created) < s.mp.searchLag || (byRef && p.ExternalReference != ref[0]) || !inRange(p) {
			continue
		}
		found = append(found, p.wire())
	}
	if get(q, "criteria") == "desc" {
		slices.Reverse(found)
	}
	page := found[min(offset, len(found)):min(offset+limit, len(found))]
	if page == nil {
		page = []*mpPaymentJSON{}
	}
	return okResult(map[string]any{"paging": map[string]int{"total": len(found), "limit": limit, "offset": offset},
		"results": page})
}

// decodeBody reads a JSON body into v; an empty body leaves v as is.
func decodeBody(c *call, v any) *result {
	if len(strings.TrimSpace(string(c.body))) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		res := mpRejected(http.StatusBadRequest, "bad_request", "invalid body: "+err.Error())
		return &res
	}
	return nil
}
