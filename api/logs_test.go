package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

func TestLogsNeverCarrySecrets(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	secrets := []string{"client-key-do-not-log-1", "client-key-do-not-log-2"}
	wantStatus(t, create(e, secrets[0], createBody("pedido-log", 2000)), http.StatusCreated)
	wantStatus(t, create(e, secrets[0], createBody("pedido-log", 2000)), http.StatusCreated)
	e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
	wantStatus(t, create(e, secrets[1], `{"order_id":"pedido-log2","amount":1,"currency":"BRL","payment_method":"pm_card_chargeDeclinedInsufficientFunds"}`), http.StatusAccepted)
	e.Sim.ClearFaults()
	wantStatus(t, create(e, secrets[1], `{"order_id":"pedido-log2","amount":1,"currency":"BRL","payment_method":"pm_card_chargeDeclinedInsufficientFunds"}`), http.StatusCreated)
	e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-card", Body: `{"order_id":"o","amount":1,"currency":"BRL","payment_method":"4000056655665556"}`})
	e.Do(apitest.Request{Method: http.MethodPost, Path: "/admin/v1/accounts", Bearer: apitest.AdminToken,
		Body: `{"name":"x","stripe_secret_key":"sk_test_admin_log_secret","webhook_secret":"whsec_log_secret"}`})

	logs := e.Logs.String()
	if !strings.Contains(logs, `"request_id"`) || !strings.Contains(logs, `"key_hash"`) {
		t.Fatalf("logs lack request_id or key_hash:\n%s", logs)
	}
	forbidden := append(secrets, e.APIKey, e.Account.StripeSecret, apitest.AdminToken, "pm_card_visa",
		"pm_card_chargeDeclinedInsufficientFunds", "4000056655665556", "sk_test_admin_log_secret", "whsec_log_secret")
	for _, s := range forbidden {
		if strings.Contains(logs, s) {
			t.Errorf("logs contain %q", s)
		}
	}
}
