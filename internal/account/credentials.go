package account

import (
	"errors"
	"strings"
)

// Provider secrets are checked byte for byte before they are hashed or
// stored. A secret with a trailing space or newline used to pass the
// "never shared" check (its fingerprint differs from the clean one) and
// then reach Stripe trimmed, so two tenants charged on one Stripe account,
// where their provider keys collide. Nothing is trimmed here: anything but
// the exact form is refused, so one Stripe account has one spelling.

// Stripe secret key prefixes: secret and restricted keys, test and live.
var stripeKeyPrefixes = []string{"sk_test_", "sk_live_", "rk_test_", "rk_live_"}

const (
	// maxSecret bounds a secret's length: Stripe's own are 24 to a little
	// over 100 characters after the prefix; the body may not be empty.
	maxSecret = 255
)

// CheckStripeSecretKey reports why s is not a Stripe secret or restricted
// key (sk_test_…, sk_live_…, rk_test_…, rk_live_…; letters, digits and
// underscores only, no white space anywhere), or nil.
func CheckStripeSecretKey(s string) error {
	for _, p := range stripeKeyPrefixes {
		if strings.HasPrefix(s, p) {
			return checkSecretBody(s, len(p))
		}
	}
	return errors.New("must be a Stripe secret key: sk_test_…, sk_live_…, rk_test_… or rk_live_…")
}

// CheckWebhookSecret reports why s is not a Stripe webhook signing secret
// (whsec_…, letters, digits and underscores only), or nil.
func CheckWebhookSecret(s string) error {
	if !strings.HasPrefix(s, "whsec_") {
		return errors.New("must be a Stripe webhook signing secret: whsec_…")
	}
	return checkSecretBody(s, len("whsec_"))
}

func checkSecretBody(s string, prefix int) error {
	if len(s) == prefix || len(s) > maxSecret {
		return errors.New("has the wrong length for a Stripe secret")
	}
	for i := prefix; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			// Never echo the secret, nor the offending character.
			return errors.New("must hold only letters, digits and underscores (no white space)")
		}
	}
	return nil
}

// Mercado Pago access token prefixes: production and test credentials.
var mercadoPagoTokenPrefixes = []string{"APP_USR-", "TEST-"}

// CheckMercadoPagoAccessToken reports why s is not a Mercado Pago access
// token (APP_USR-… or TEST-…; letters, digits, hyphens and underscores
// only, no white space anywhere), or nil.
func CheckMercadoPagoAccessToken(s string) error {
	for _, p := range mercadoPagoTokenPrefixes {
		if strings.HasPrefix(s, p) {
			return checkToken(s, len(p), "must hold only letters, digits, hyphens and underscores (no white space)")
		}
	}
	return errors.New("must be a Mercado Pago access token: APP_USR-… or TEST-…")
}

// CheckMercadoPagoWebhookSecret reports why s is not a Mercado Pago
// webhook secret (letters, digits, hyphens and underscores, no white
// space), or nil.
func CheckMercadoPagoWebhookSecret(s string) error {
	return checkToken(s, 0, "must hold only letters, digits, hyphens and underscores (no white space)")
}

func checkToken(s string, prefix int, msg string) error {
	if len(s) == prefix || len(s) > maxSecret {
		return errors.New("has the wrong length for a Mercado Pago credential")
	}
	for i := prefix; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			// Never echo the secret, nor the offending character.
			return errors.New(msg)
		}
	}
	return nil
}
