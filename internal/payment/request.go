package payment

import (
	"fmt"
	"regexp"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

var (
	orderIDPattern       = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	paymentMethodPattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,255}$`)
	customerIDPattern    = regexp.MustCompile(`^[A-Za-z0-9_]{1,255}$`)
)

// Limits of a create request.
const (
	MaxAmount         = 99999999
	MaxMetadataKeys   = 20
	MaxMetadataKeyLen = 40
	MaxMetadataValLen = 500
	MaxDescriptionLen = 1000
)

// CreateRequest is a normalized create: defaults applied, currency upper
// case. Its JSON encoding is canonical (fixed field order, sorted map keys)
// and is what the fingerprint hashes.
type CreateRequest struct {
	OrderID       string `json:"order_id"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method,omitempty"`
	// PaymentMethods, instead of PaymentMethod, names the card at each
	// provider (CONTRACT §15); PaymentMethod is then "".
	PaymentMethods *PaymentMethods   `json:"payment_methods,omitempty"`
	CaptureMethod  string            `json:"capture_method"`
	CustomerID     string            `json:"customer_id,omitempty"`
	Description    string            `json:"description,omitempty"`
	Metadata       map[string]string `json:"metadata"`
	// Fields of payments that wait for the customer (CONTRACT §12); empty
	// for a card payment, so its fingerprint is unchanged.
	ReturnURL      string          `json:"return_url,omitempty"`
	ExpiresIn      int64           `json:"expires_in,omitempty"`
	BillingDetails *BillingDetails `json:"billing_details,omitempty"`
}

type createBody struct {
	OrderID        *string            `json:"order_id"`
	Amount         jsontext.Value     `json:"amount"`
	Currency       *string            `json:"currency"`
	PaymentMethod  *string            `json:"payment_method"`
	PaymentMethods *methodsBody       `json:"payment_methods"`
	CaptureMethod  *string            `json:"capture_method"`
	CustomerID     *string            `json:"customer_id"`
	Description    *string            `json:"description"`
	Metadata       map[string]*string `json:"metadata"`
	ReturnURL      *string            `json:"return_url"`
	ExpiresIn      jsontext.Value     `json:"expires_in"`
	BillingDetails *billingBody       `json:"billing_details"`
}

// ParseCreateRequest decodes, validates and normalizes a create body. Field
// problems are reported together; a value that looks like card data is never
// echoed back.
func ParseCreateRequest(body []byte) (CreateRequest, error) {
	var b createBody
	// A CNPJ is 14 digits and may pass the Luhn check: it is checked as a
	// tax id, not as card data.
	if err := DecodeStrict(body, &b, "billing_details.tax_id"); err != nil {
		return CreateRequest{}, err
	}
	var fe []FieldError
	bad := func(field, msg string) { fe = append(fe, FieldError{Field: field, Message: msg}) }
	r := CreateRequest{CaptureMethod: "automatic", Metadata: map[string]string{}}

	parseRequiredFields(&b, &r, bad)
	parseOptionalFields(&b, &r, bad)
	parseMetadata(b.Metadata, r.Metadata, bad)
	parseMethodFields(&b, &r, bad)

	if len(fe) > 0 {
		return CreateRequest{}, &Error{Code: CodeInvalidRequest, Message: "the request has invalid fields", Fields: fe}
	}
	return r, nil
}

// parseRequiredFields reads order_id, amount, currency and payment_method
// (or payment_methods).
func parseRequiredFields(b *createBody, r *CreateRequest, bad func(field, msg string)) {
	switch {
	case b.OrderID == nil:
		bad("order_id", "is required")
	case !orderIDPattern.MatchString(*b.OrderID):
		bad("order_id", "must match ^[A-Za-z0-9._-]{1,64}$")
	default:
		r.OrderID = *b.OrderID
	}

	if len(b.Amount) == 0 {
		bad("amount", "is required")
	} else if n, ok := ParseAmount(b.Amount); !ok {
		bad("amount", fmt.Sprintf("must be an integer from 1 to %d (minor units)", MaxAmount))
	} else {
		r.Amount = n
	}

	switch {
	case b.Currency == nil:
		bad("currency", "is required")
	default:
		if c, err := ParseCurrency(*b.Currency); err != nil {
			bad("currency", err.Error())
		} else {
			r.Currency = c
		}
	}

	switch {
	case b.PaymentMethod != nil && b.PaymentMethods != nil:
		bad("payment_methods", "send either payment_method or payment_methods, not both")
	case b.PaymentMethods != nil:
		r.PaymentMethods = parsePaymentMethods(b.PaymentMethods, bad)
	case b.PaymentMethod == nil:
		bad("payment_method", "is required")
	case ContainsCardNumber(*b.PaymentMethod):
		bad("payment_method", "looks like a card number; send a provider token (pm_…), never card data")
	case !paymentMethodPattern.MatchString(*b.PaymentMethod):
		bad("payment_method", "must be a provider token matching ^[A-Za-z0-9_]{1,255}$")
	default:
		r.PaymentMethod = *b.PaymentMethod
	}
}

// parseOptionalFields reads capture_method, customer_id and description.
func parseOptionalFields(b *createBody, r *CreateRequest, bad func(field, msg string)) {
	if b.CaptureMethod != nil {
		switch *b.CaptureMethod {
		case "automatic", "manual":
			r.CaptureMethod = *b.CaptureMethod
		default:
			bad("capture_method", "must be automatic or manual")
		}
	}

	if b.CustomerID != nil {
		if !customerIDPattern.MatchString(*b.CustomerID) {
			bad("customer_id", "must match ^[A-Za-z0-9_]{1,255}$")
		} else {
			r.CustomerID = *b.CustomerID
		}
	}

	if b.Description != nil {
		if utf8.RuneCountInString(*b.Description) > MaxDescriptionLen {
			bad("description", fmt.Sprintf("must be at most %d characters", MaxDescriptionLen))
		} else {
			r.Description = *b.Description
		}
	}
}

// parseMetadata checks the metadata and copies its valid entries to dst.
func parseMetadata(md map[string]*string, dst map[string]string, bad func(field, msg string)) {
	if len(md) > MaxMetadataKeys {
		bad("metadata", fmt.Sprintf("must have at most %d keys", MaxMetadataKeys))
	}
	for k, v := range md {
		switch {
		case k == "" || utf8.RuneCountInString(k) > MaxMetadataKeyLen:
			bad("metadata", fmt.Sprintf("keys must be 1 to %d characters", MaxMetadataKeyLen))
		case v == nil:
			bad("metadata."+Excerpt(k), "must be a string")
		case utf8.RuneCountInString(*v) > MaxMetadataValLen:
			bad("metadata."+Excerpt(k), fmt.Sprintf("must be at most %d characters", MaxMetadataValLen))
		default:
			dst[k] = *v
		}
	}
}

// parseMethodFields reads the fields of payments that wait for the
// customer: return_url, expires_in with its per-method default, and the
// billing details Boleto requires.
func parseMethodFields(b *createBody, r *CreateRequest, bad func(field, msg string)) {
	method := ""
	if b.PaymentMethod != nil {
		method = *b.PaymentMethod
	}
	if b.ReturnURL != nil {
		if checkReturnURL(*b.ReturnURL) {
			r.ReturnURL = *b.ReturnURL
		} else {
			bad("return_url", "must be an absolute https URL (http only for localhost)")
		}
	}
	if (method == MethodPix || method == MethodBoleto) && b.CaptureMethod != nil && *b.CaptureMethod == "manual" {
		bad("capture_method", "must be automatic for "+method+": it is captured when the customer pays")
	}
	lo, hi, def, unit := int64(0), int64(0), int64(0), ""
	switch method {
	case MethodPix:
		lo, hi, def, unit = PixExpiresMin, PixExpiresMax, PixExpiresDefault, "seconds"
	case MethodBoleto:
		lo, hi, def, unit = BoletoExpiresMin, BoletoExpiresMax, BoletoExpiresDefault, "days"
	}
	switch {
	case len(b.ExpiresIn) > 0 && def == 0:
		bad("expires_in", "is only for pix and boleto")
	case len(b.ExpiresIn) > 0:
		n, ok := ParseAmount(b.ExpiresIn)
		if !ok || n < lo || n > hi {
			bad("expires_in", fmt.Sprintf("must be an integer from %d to %d (%s) for %s", lo, hi, unit, method))
		} else {
			r.ExpiresIn = n
		}
	default:
		r.ExpiresIn = def
	}
	switch {
	case b.BillingDetails != nil:
		r.BillingDetails = parseBilling(b.BillingDetails, method == MethodBoleto, bad)
	case method == MethodBoleto:
		bad("billing_details", "is required for boleto")
	}
}
