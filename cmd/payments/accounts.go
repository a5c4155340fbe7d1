package main

import (
	"fmt"

	"github.com/acmepay/payments/internal/account"
)

// checkCredentialFlags names the flag of a malformed provider secret, so
// an operator sees which one to fix; the secret itself is never printed.
func checkCredentialFlags(stripeKey, webhookSecret string) error {
	if err := account.CheckStripeSecretKey(stripeKey); err != nil {
		return fmt.Errorf("--stripe-key %w", err)
	}
	if webhookSecret != "" {
		if err := account.CheckWebhookSecret(webhookSecret); err != nil {
			return fmt.Errorf("--webhook-secret %w", err)
		}
	}
	return nil
}
