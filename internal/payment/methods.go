package payment

import (
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acmepay/payments/internal/provider"
)

// Payment methods the service asks the provider to create itself; every
// other payment_method is a provider token (pm_…).
const (
	MethodPix    = "pix"
	MethodBoleto = "boleto"
)

// Expiry bounds of the methods the customer pays later (CONTRACT §12).
const (
	PixExpiresMin        = 60
	PixExpiresMax        = 86400
	PixExpiresDefault    = 3600
	BoletoExpiresMin     = 1
	BoletoExpiresMax     = 60
	BoletoExpiresDefault = 3
)

// ExpiresAt is when a Pix or Boleto asked for at now stops being payable
// (expiresIn seconds or days later, or the default); zero for a card.
func (o MethodOptions) ExpiresAt(method string, now time.Time) time.Time {
	switch method {
	case MethodPix:
		n := o.ExpiresIn
		if n <= 0 {
			n = PixExpiresDefault
		}
		return now.Add(time.Duration(n) * time.Second).UTC()
	case MethodBoleto:
		n := o.ExpiresIn
		if n <= 0 {
			n = BoletoExpiresDefault
		}
		return now.AddDate(0, 0, int(n)).UTC()
	}
	return time.Time{}
}

// maxDetailLen bounds each free-text field of billing details.
const maxDetailLen = 200

// BillingDetails identify the payer; Boleto requires them. TaxID holds
// the digits of a CPF or CNPJ.
type BillingDetails = provider.BillingDetails

// Address is the payer's billing address.
type Address = provider.Address

// MethodOptions is what an authorization carries beyond a card token;
// every attempt of the payment sends it again.
type MethodOptions struct {
	ReturnURL      string          `json:"return_url,omitempty"`
	ExpiresIn      int64           `json:"expires_in,omitempty"`
	BillingDetails *BillingDetails `json:"billing_details,omitempty"`
	// Methods is the create's payment_methods: each attempt takes its
	// provider's entry.
	Methods *PaymentMethods `json:"payment_methods,omitempty"`
}

type billingBody struct {
	Name    *string      `json:"name"`
	Email   *string      `json:"email"`
	TaxID   *string      `json:"tax_id"`
	Address *addressBody `json:"address"`
}

type addressBody struct {
	Line1      *string `json:"line1"`
	City       *string `json:"city"`
	State      *string `json:"state"`
	PostalCode *string `json:"postal_code"`
	Country    *string `json:"country"`
}

// checkReturnURL accepts an absolute https URL, or http for localhost
// (a developer's machine).
func checkReturnURL(s string) bool {
	if len(s) > 2048 {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		h := u.Hostname()
		return h == "localhost" || h == "127.0.0.1" || h == "::1" || strings.HasSuffix(h, ".localhost")
	}
	return false
}

// parseBilling validates billing details; bad reports each problem. A
// Boleto needs them whole; any other payment may give only some (Mercado
// Pago needs just the email), each checked as given, and an address is
// always whole.
func parseBilling(b *billingBody, full bool, bad func(field, msg string)) *BillingDetails {
	out := &BillingDetails{}
	text := func(field string, v *string, dst *string, required bool) {
		switch {
		case v == nil && required:
			bad(field, "is required")
		case v == nil:
		case strings.TrimSpace(*v) == "":
			bad(field, "must not be empty")
		case utf8.RuneCountInString(*v) > maxDetailLen:
			bad(field, fmt.Sprintf("must be at most %d characters", maxDetailLen))
		default:
			*dst = *v
		}
	}
	text("billing_details.name", b.Name, &out.Name, full)
	text("billing_details.email", b.Email, &out.Email, full)
	if out.Email != "" && !validEmail(out.Email) {
		bad("billing_details.email", "must be an email address")
	}
	switch {
	case b.TaxID == nil && full:
		bad("billing_details.tax_id", "is required")
	case b.TaxID != nil:
		if id, ok := NormalizeTaxID(*b.TaxID); ok {
			out.TaxID = id
		} else {
			bad("billing_details.tax_id", "must be a valid CPF (11 digits) or CNPJ (14 digits)")
		}
	}
	if b.Address == nil {
		if full {
			bad("billing_details.address", "is required")
		}
		return out
	}
	a := b.Address
	text("billing_details.address.line1", a.Line1, &out.Address.Line1, true)
	text("billing_details.address.city", a.City, &out.Address.City, true)
	text("billing_details.address.state", a.State, &out.Address.State, true)
	text("billing_details.address.postal_code", a.PostalCode, &out.Address.PostalCode, true)
	text("billing_details.address.country", a.Country, &out.Address.Country, true)
	if c := out.Address.Country; c != "" {
		if len(c) != 2 || strings.ToUpper(c) != c || strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			bad("billing_details.address.country", "must be a two-letter upper-case country code (ISO 3166-1)")
		}
	}
	return out
}

func validEmail(s string) bool {
	local, domain, ok := strings.Cut(s, "@")
	return ok && local != "" && strings.Contains(domain, ".") && !strings.ContainsAny(s, " \t\r\n")
}

// NormalizeTaxID reads a CPF or CNPJ, plain or punctuated (123.456.789-09,
// 12.345.678/0001-95), and returns its digits when the check digits are
// right.
func NormalizeTaxID(s string) (string, bool) {
	var d []byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			d = append(d, c)
		case c == '.' || c == '-' || c == '/':
		default:
			return "", false
		}
	}
	switch len(d) {
	case 11:
		return string(d), validCPF(d)
	case 14:
		return string(d), validCNPJ(d)
	}
	return "", false
}

func allSame(d []byte) bool {
	for _, c := range d {
		if c != d[0] {
			return false
		}
	}
	return true
}

// validCPF checks both mod-11 check digits; a run of one digit
// (111.111.111-11) passes the arithmetic but is no CPF.
func validCPF(d []byte) bool {
	if allSame(d) {
		return false
	}
	for n := 9; n <= 10; n++ {
		sum := 0
		for i := 0; i < n; i++ {
			sum += int(d[i]-'0') * (n + 1 - i)
		}
		check := sum * 10 % 11 % 10
		if check != int(d[n]-'0') {
			return false
		}
	}
	return true
}

// validCNPJ checks both mod-11 check digits with the CNPJ weights.
func validCNPJ(d []byte) bool {
	if allSame(d) {
		return false
	}
	weights := []int{6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}
	for n := 12; n <= 13; n++ {
		sum := 0
		for i := 0; i < n; i++ {
			sum += int(d[i]-'0') * weights[i+13-n]
		}
		check := 11 - sum%11
		if check >= 10 {
			check = 0
		}
		if check != int(d[n]-'0') {
			return false
		}
	}
	return true
}
