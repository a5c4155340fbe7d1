package mercadopago

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mercadopago/sdk-go/pkg/payment"

	"github.com/acmepay/payments/internal/provider"
)

const (
	methodPix = "pix"
	// threeDSOptional lets Mercado Pago ask for a 3-D Secure challenge
	// (status_detail pending_challenge) instead of refusing the card.
	threeDSOptional = "optional"
	// Defaults of CONTRACT §12 when the request gives no expiry.
	defaultPixSeconds  = 3600
	defaultBoletoDays  = 3
	defaultInstallment = 1
)

// expiryLayout is date_of_expiration as the API reference writes it
// (yyyy-MM-dd'T'HH:mm:ss.SSSZ, e.g. 2022-11-17T09:37:52.000-04:00).
const expiryLayout = "2006-01-02T15:04:05.000-07:00"

// paymentRequest builds the create-payment body, and the fields the
// requester writes into it as they are (see call.set). The caller's metadata is
// sent as metadata; external_reference is "{payment_id}:{attempt}", which
// the lookups search for. Mercado Pago needs the payer's email for every
// payment, and for a Boleto their name, CPF or CNPJ and address.
func (p *Provider) paymentRequest(r provider.AuthorizeRequest) (payment.Request, map[string]any, error) {
	ref, err := externalReference(r.Metadata)
	if err != nil {
		return payment.Request{}, nil, err
	}
	if !siteCurrencies[strings.ToUpper(r.Currency)] {
		return payment.Request{}, nil, fmt.Errorf("currency %q is not one Mercado Pago charges in", r.Currency)
	}
	b := r.BillingDetails
	if b == nil || b.Email == "" {
		return payment.Request{}, nil, errors.New("mercado pago needs the payer's email (billing_details.email)")
	}
	req := payment.Request{
		TransactionAmount: toMajor(r.Amount),
		Description:       r.Description,
		ExternalReference: ref,
		CallbackURL:       r.ReturnURL,
		Payer:             &payment.PayerRequest{Email: b.Email},
		Metadata:          make(map[string]any, len(r.Metadata)),
	}
	for k, v := range r.Metadata {
		req.Metadata[k] = v
	}
	set := map[string]any{}
	return req, set, p.paymentMethod(&req, set, r)
}

// paymentMethod fills in the card, Pix or Boleto part of a request.
func (p *Provider) paymentMethod(req *payment.Request, set map[string]any, r provider.AuthorizeRequest) error {
	if r.CaptureMethod == "manual" && r.MercadoPago == nil {
		return errors.New("only a card can be authorized for a later capture")
	}
	switch {
	case r.MercadoPago != nil:
		card := r.MercadoPago
		if card.Token == "" || card.PaymentMethodID == "" {
			return errors.New("a Mercado Pago card needs its token and payment_method_id")
		}
		req.Token, req.PaymentMethodID, req.Installments = card.Token, card.PaymentMethodID, card.Installments
		if req.Installments == 0 {
			req.Installments = defaultInstallment
		}
		req.ThreeDSecureMode = threeDSOptional
	case r.PaymentMethod == provider.MethodPix:
		req.PaymentMethodID = methodPix
		set["date_of_expiration"] = p.expiration(r)
	case r.PaymentMethod == provider.MethodBoleto:
		req.PaymentMethodID = p.boleto
		set["date_of_expiration"] = p.expiration(r)
		return boletoPayer(req.Payer, r.BillingDetails)
	default:
		return errors.New("a card on Mercado Pago needs its Mercado Pago token (payment_methods.mercadopago)")
	}
	return nil
}

// expiration is a Pix's or Boleto's date_of_expiration: the attempt's
// ExpiresAt, so that a re-send of the attempt's key carries the body the
// key was first sent with (Mercado Pago answers a reused key with another
// body 409). An attempt stored before ExpiresAt was recorded counts
// ExpiresIn, or its default, from now.
func (p *Provider) expiration(r provider.AuthorizeRequest) string {
	if !r.ExpiresAt.IsZero() {
		return r.ExpiresAt.UTC().Format(expiryLayout)
	}
	n, at := r.ExpiresIn, p.now()
	if r.PaymentMethod == provider.MethodBoleto {
		if n <= 0 {
			n = defaultBoletoDays
		}
		return at.AddDate(0, 0, int(n)).UTC().Format(expiryLayout)
	}
	if n <= 0 {
		n = defaultPixSeconds
	}
	return at.Add(time.Duration(n) * time.Second).UTC().Format(expiryLayout)
}

// externalReference is "{payment_id}:{attempt}" from the service's metadata.
func externalReference(md map[string]string) (string, error) {
	id, attempt := md["payment_id"], md["attempt"]
	if id == "" || attempt == "" {
		return "", errors.New("metadata needs payment_id and attempt")
	}
	return id + ":" + attempt, nil
}

// boletoPayer adds what a Boleto needs: the name split into first and last,
// the CPF (11 digits) or CNPJ (14), and the address. Line1 "Rua X, 123"
// gives street and number; without a number it is "S/N" (sem número).
// Billing details have no neighborhood, so none is sent.
func boletoPayer(pr *payment.PayerRequest, b *provider.BillingDetails) error {
	doc := digits(b.TaxID)
	var docType string
	switch len(doc) {
	case 11:
		docType = "CPF"
	case 14:
		docType = "CNPJ"
	default:
		return errors.New("a Boleto needs the payer's CPF or CNPJ (billing_details.tax_id)")
	}
	first, last, _ := strings.Cut(strings.TrimSpace(b.Name), " ")
	a := b.Address
	if first == "" || a.Line1 == "" || a.City == "" || a.State == "" || a.PostalCode == "" {
		return errors.New("a Boleto needs the payer's name and address (line1, city, state, postal_code)")
	}
	street, number := a.Line1, "S/N"
	if i := strings.LastIndex(a.Line1, ","); i > 0 && strings.TrimSpace(a.Line1[i+1:]) != "" {
		street, number = strings.TrimSpace(a.Line1[:i]), strings.TrimSpace(a.Line1[i+1:])
	}
	pr.FirstName, pr.LastName = first, strings.TrimSpace(last)
	pr.Identification = &payment.IdentificationRequest{Type: docType, Number: doc}
	pr.Address = &payment.AddressRequest{ZipCode: digits(a.PostalCode), StreetName: street, StreetNumber: number,
		City: a.City, FederalUnit: strings.ToUpper(a.State)}
	return nil
}

func digits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}
