package mercadopago

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mercadopago/sdk-go/pkg/payment"
	"github.com/mercadopago/sdk-go/pkg/refund"

	"github.com/acmepay/payments/internal/provider"
)

// Mercado Pago's payment statuses and the status_detail values the mapping
// reads (API reference, payments: status and status_detail).
const (
	statusApproved    = "approved"
	statusAuthorized  = "authorized"
	statusPending     = "pending"
	statusInProcess   = "in_process"
	statusInMediation = "in_mediation"
	statusRejected    = "rejected"
	statusCancelled   = "cancelled"
	statusRefunded    = "refunded"
	statusChargedBack = "charged_back"

	detailPendingChallenge = "pending_challenge"
	detailExpired          = "expired"
	detail3DSChallenge     = "cc_rejected_3ds_challenge"
)

// intentState maps status (and, where it matters, status_detail) onto the
// service's terms.
func intentState(status, detail string) provider.IntentState {
	switch status {
	case statusApproved, statusRefunded, statusChargedBack, statusInMediation:
		// Money was taken; refunds and chargebacks are read separately.
		return provider.IntentCaptured
	case statusAuthorized:
		return provider.IntentAuthorized
	case statusPending:
		// pending_waiting_transfer (Pix), pending_waiting_payment (Boleto),
		// pending_challenge (3-D Secure): the customer must act.
		// pending_contingency and pending_review_manual: Mercado Pago is
		// processing.
		switch detail {
		case "pending_contingency", "pending_review_manual":
			return provider.IntentProcessing
		}
		return provider.IntentRequiresAction
	case statusInProcess:
		return provider.IntentProcessing
	case statusRejected:
		return provider.IntentNeedsPaymentMethod
	case statusCancelled:
		return provider.IntentCanceled
	}
	return provider.IntentOther
}

// failure explains a rejected or lapsed payment.
func failure(p *payment.Response) (code, msg string) {
	switch {
	case p.Status == statusRejected && p.StatusDetail == detail3DSChallenge:
		return provider.FailureAuthentication, "the customer failed 3-D Secure"
	case p.Status == statusRejected:
		return p.StatusDetail, "mercadopago rejected the payment: " + p.StatusDetail
	case p.Status == statusCancelled && p.StatusDetail == detailExpired:
		return provider.FailureExpired, "the customer did not pay in time"
	}
	return "", ""
}

// siteCurrencies are the currencies of Mercado Pago's sites whose amounts
// have two decimals. The payment request carries no currency (the
// account's site decides it), so any other currency is refused before
// sending. CLP (no decimals) is left out: refunds carry no currency, so
// their amounts could not be read back without another call.
var siteCurrencies = map[string]bool{"ARS": true, "BRL": true, "COP": true, "MXN": true, "PEN": true, "UYU": true}

// toMajor and toMinor convert between the service's smallest unit and
// Mercado Pago's decimal amounts.
func toMajor(amount int64) float64 { return float64(amount) / 100 }

func toMinor(amount float64) int64 { return int64(math.Round(amount * 100)) }

func toIntent(p *payment.Response) *provider.Intent {
	if p == nil {
		return nil
	}
	md := make(map[string]string, len(p.Metadata))
	for k, v := range p.Metadata {
		md[k] = fmt.Sprint(v)
	}
	in := &provider.Intent{
		ID:            strconv.Itoa(p.ID),
		State:         intentState(p.Status, p.StatusDetail),
		Amount:        toMinor(p.TransactionAmount),
		Currency:      strings.ToLower(p.CurrencyID),
		CaptureMethod: "automatic",
		Metadata:      md,
	}
	if !p.Captured {
		in.CaptureMethod = "manual"
	}
	switch in.State {
	case provider.IntentAuthorized:
		in.AmountCapturable = in.Amount
	case provider.IntentCaptured:
		in.AmountReceived = in.Amount
	case provider.IntentRequiresAction:
		in.NextAction = nextAction(p)
		// A challenge is not a plain redirect: the frontend must POST this
		// creq (form field "creq") to the redirect's url, the issuer's page,
		// as Mercado Pago's 3-D Secure guide has it (its Status Screen Brick
		// takes the same pair, external_resource_url and creq). client_secret
		// is the answer's one field for what the frontend hands the
		// provider, so the creq travels there; Pix and Boleto have none.
		in.ClientSecret = p.ThreeDSInfo.Creq
	}
	in.FailureCode, in.FailureMessage = failure(p)
	// A rejected payment is final: another card is another payment.
	in.Closed = p.Status == statusRejected
	return in
}

// nextAction maps what a pending payment waits for onto §12's shapes.
func nextAction(p *payment.Response) *provider.NextAction {
	td := p.PointOfInteraction.TransactionData
	switch {
	case p.StatusDetail == detailPendingChallenge && p.ThreeDSInfo.ExternalResourceURL != "":
		return &provider.NextAction{Type: provider.NextRedirectToURL, RedirectToURL: &provider.RedirectToURL{
			URL: p.ThreeDSInfo.ExternalResourceURL, ReturnURL: p.CallbackURL}}
	case p.PaymentMethodID == methodPix || td.QRCode != "":
		na := &provider.NextAction{Type: provider.NextPixQRCode, PixQRCode: &provider.PixQRCode{
			Data: td.QRCode, HostedInstructionsURL: td.TicketURL, ExpiresAt: rfc3339(p.DateOfExpiration)}}
		if td.QRCodeBase64 != "" {
			na.PixQRCode.ImageURLPNG = "data:image/png;base64," + td.QRCodeBase64
		}
		return na
	case p.PaymentTypeID == "ticket":
		t := p.TransactionDetails
		number := t.DigitableLine
		if number == "" {
			number = t.Barcode.Content
		}
		return &provider.NextAction{Type: provider.NextBoletoDetails, BoletoDetails: &provider.BoletoDetails{
			Number: number, HostedVoucherURL: t.ExternalResourceURL, PDF: t.ExternalResourceURL,
			ExpiresAt: rfc3339(p.DateOfExpiration)}}
	}
	return &provider.NextAction{Type: provider.NextActionUnhandled}
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// refundState maps a refund's status onto the service's terms.
func refundState(status string) provider.RefundState {
	switch status {
	case "approved":
		return provider.RefundSucceeded
	case "in_process", "pending", "authorized":
		return provider.RefundPending
	case "rejected", "cancelled":
		return provider.RefundFailed
	}
	return provider.RefundOther
}

// toRefund maps a refund. Mercado Pago keeps no metadata on refunds, so
// Metadata is empty.
func toRefund(r *refund.Response) *provider.Refund {
	return &provider.Refund{ID: strconv.Itoa(r.ID), State: refundState(r.Status),
		Amount: toMinor(r.Amount), Metadata: map[string]string{}}
}
