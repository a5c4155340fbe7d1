package account

import (
	"context"
	"slices"

	"github.com/acmepay/payments/internal/payment"
)

// Secrets are the provider credentials an account is created with, or
// one provider's that replace what it had there.
type Secrets struct {
	StripeSecret, WebhookSecret                string
	MercadoPagoToken, MercadoPagoWebhookSecret string
}

// Field names of Secrets, as the API and the errors spell them.
const (
	fieldStripeSecret   = "stripe_secret_key"
	fieldStripeWebhook  = "webhook_secret"
	fieldMPToken        = "mercadopago_access_token"
	fieldMPWebhook      = "mercadopago_webhook_secret"
	msgNeedsOneProvider = "is required unless mercadopago_access_token is given"
)

func invalidFields(fe []payment.FieldError) error {
	return &payment.Error{Code: payment.CodeInvalidRequest, Message: "the request has invalid fields", Fields: fe}
}

// check reports the field problems of credentials for a new account: at
// least one provider's, each complete and well formed.
func (sec Secrets) check() []payment.FieldError {
	var fe []payment.FieldError
	switch {
	case sec.StripeSecret != "" || sec.WebhookSecret != "":
		fe = append(fe, sec.checkStripe()...)
	case sec.MercadoPagoToken == "" && sec.MercadoPagoWebhookSecret == "":
		fe = append(fe, payment.FieldError{Field: fieldStripeSecret, Message: msgNeedsOneProvider})
	}
	if sec.MercadoPagoToken != "" || sec.MercadoPagoWebhookSecret != "" {
		fe = append(fe, sec.checkMercadoPago()...)
	}
	return fe
}

func (sec Secrets) checkStripe() []payment.FieldError {
	var fe []payment.FieldError
	if err := CheckStripeSecretKey(sec.StripeSecret); err != nil {
		fe = append(fe, payment.FieldError{Field: fieldStripeSecret, Message: err.Error()})
	}
	if sec.WebhookSecret != "" {
		if err := CheckWebhookSecret(sec.WebhookSecret); err != nil {
			fe = append(fe, payment.FieldError{Field: fieldStripeWebhook, Message: err.Error()})
		}
	}
	return fe
}

func (sec Secrets) checkMercadoPago() []payment.FieldError {
	var fe []payment.FieldError
	if err := CheckMercadoPagoAccessToken(sec.MercadoPagoToken); err != nil {
		fe = append(fe, payment.FieldError{Field: fieldMPToken, Message: err.Error()})
	}
	if sec.MercadoPagoWebhookSecret != "" {
		if err := CheckMercadoPagoWebhookSecret(sec.MercadoPagoWebhookSecret); err != nil {
			fe = append(fe, payment.FieldError{Field: fieldMPWebhook, Message: err.Error()})
		}
	}
	return fe
}

// only reports the fields of providers other than name that sec carries:
// one provider's credentials are replaced at a time.
func (sec Secrets) only(name string) []payment.FieldError {
	var fe []payment.FieldError
	other := func(field, value string) {
		if value != "" {
			fe = append(fe, payment.FieldError{Field: field, Message: "belongs to another provider than " + name})
		}
	}
	if name != payment.ProviderStripe {
		other(fieldStripeSecret, sec.StripeSecret)
		other(fieldStripeWebhook, sec.WebhookSecret)
	}
	if name != payment.ProviderMercadoPago {
		other(fieldMPToken, sec.MercadoPagoToken)
		other(fieldMPWebhook, sec.MercadoPagoWebhookSecret)
	}
	return fe
}

// providers is the account's providers in the order added; a row stored
// before there was a choice has Stripe alone.
func (r Row) providers() []string {
	if len(r.Providers) == 0 && r.StripeSecretEnc != nil {
		return []string{payment.ProviderStripe}
	}
	return append([]string{}, r.Providers...)
}

// withProvider is r's providers with name last unless it is there already.
func (r Row) withProvider(name string) []string {
	ps := r.providers()
	if !slices.Contains(ps, name) {
		ps = append(ps, name)
	}
	return ps
}

// sealStripe puts sec's Stripe credentials in r, replacing any.
func (s *Service) sealStripe(r Row, sec Secrets) Row {
	r.Providers = r.withProvider(payment.ProviderStripe)
	r.StripeSecretEnc = s.current.seal(sec.StripeSecret)
	r.StripeSecretHMAC = s.current.fingerprint(sec.StripeSecret)
	r.WebhookSecretEnc = nil
	if sec.WebhookSecret != "" {
		r.WebhookSecretEnc = s.current.seal(sec.WebhookSecret)
	}
	return r
}

// sealMercadoPago puts sec's Mercado Pago credentials in r, replacing any.
func (s *Service) sealMercadoPago(r Row, sec Secrets) Row {
	r.Providers = r.withProvider(payment.ProviderMercadoPago)
	r.MercadoPagoTokenEnc = s.current.seal(sec.MercadoPagoToken)
	r.MercadoPagoTokenHMAC = s.current.fingerprint(sec.MercadoPagoToken)
	r.MercadoPagoWebhookSecretEnc = nil
	if sec.MercadoPagoWebhookSecret != "" {
		r.MercadoPagoWebhookSecretEnc = s.current.seal(sec.MercadoPagoWebhookSecret)
	}
	return r
}

// checkPreviousFingerprints refuses credentials another account holds
// under the previous key: accounts not yet re-encrypted carry their
// fingerprints under it, which the unique indexes cannot compare. exceptID
// is the account whose own credentials are being replaced.
func (s *Service) checkPreviousFingerprints(ctx context.Context, sec Secrets, exceptID string) error {
	if s.previous == nil {
		return nil
	}
	check := func(secret string, lookup func(context.Context, []byte) (string, error)) error {
		if secret == "" {
			return nil
		}
		id, err := lookup(ctx, s.previous.fingerprint(secret))
		if err != nil {
			return err
		}
		if id != "" && id != exceptID {
			return ErrCredentialsInUse
		}
		return nil
	}
	if err := check(sec.StripeSecret, s.store.AccountIDBySecretHMAC); err != nil {
		return err
	}
	return check(sec.MercadoPagoToken, s.store.AccountIDByMercadoPagoHMAC)
}

// SetProvider adds or replaces one provider's credentials of an account
// ("stripe" or "mercadopago") and returns the account without secrets.
// Instances that authenticated the account's API key in the last 30 s may
// still use its former credentials until their cache expires.
func (s *Service) SetProvider(ctx context.Context, id, name string, sec Secrets) (Summary, error) {
	var fe []payment.FieldError
	switch name {
	case payment.ProviderStripe:
		fe = sec.checkStripe()
	case payment.ProviderMercadoPago:
		fe = sec.checkMercadoPago()
	default:
		return Summary{}, invalidFields([]payment.FieldError{{Field: "provider", Message: "must be stripe or mercadopago"}})
	}
	if fe = append(fe, sec.only(name)...); len(fe) > 0 {
		return Summary{}, invalidFields(fe)
	}
	if _, err := s.store.AccountGetByID(ctx, id); err != nil {
		return Summary{}, err
	}
	stripeAccount := ""
	if name == payment.ProviderStripe {
		var err error
		if stripeAccount, err = s.providerAccount(ctx, sec.StripeSecret); err != nil {
			return Summary{}, err
		}
	}
	if err := s.checkPreviousFingerprints(ctx, sec, id); err != nil {
		return Summary{}, err
	}
	row, err := s.store.AccountUpdateProviders(ctx, id, func(r Row) (Row, error) {
		if name == payment.ProviderStripe {
			r.StripeAccountID = stripeAccount
			return s.sealStripe(r, sec), nil
		}
		return s.sealMercadoPago(r, sec), nil
	})
	if err != nil {
		return Summary{}, err
	}
	s.forget(id)
	return summarize(row, s.now()), nil
}

// forget drops this instance's cached authentications of an account.
func (s *Service) forget(id string) {
	s.keys.Range(func(k, v any) bool {
		if v.(cachedAccount).account.ID == id {
			s.keys.Delete(k)
		}
		return true
	})
}
