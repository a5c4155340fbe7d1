package providersim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// permissions maps each operation to the restricted-key permission Stripe
// would ask for; its keys are the known operations.
var permissions = map[string]string{
	"authorize":       "rak_payment_intent_write",
	"confirm":         "rak_payment_intent_write",
	"capture":         "rak_payment_intent_write",
	"cancel":          "rak_payment_intent_write",
	"retrieve":        "rak_payment_intent_read",
	"search":          "rak_payment_intent_read",
	"refund":          "rak_refund_write",
	"retrieve_refund": "rak_refund_read",
	"list_refunds":    "rak_refund_read",
}

// RevokeSecret makes every later request with the secret key answer 401, as
// Stripe does for a rolled or deleted key. Stripe authenticates before it
// looks at the Idempotency-Key, so such a request replays nothing, stores
// nothing, meets no fault and has no effect; it is logged and counted in
// Requests. The key's objects stay for RestoreSecret.
func (s *Server) RevokeSecret(secretKey string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked[secretKey] = true
}

// ForbidSecret makes the secret key act like a restricted key that lacks the
// permission for ops (every operation when none is given): those requests
// answer 403 before the idempotency lookup, with no effect. Calls add up. It
// panics on an unknown operation.
func (s *Server) ForbidSecret(secretKey string, ops ...string) {
	if len(ops) == 0 {
		for op := range permissions {
			ops = append(ops, op)
		}
	}
	for _, op := range ops {
		if _, ok := permissions[op]; !ok {
			panic(fmt.Sprintf("providersim: unknown operation %q", op))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	denied := s.forbidden[secretKey]
	if denied == nil {
		denied = map[string]bool{}
		s.forbidden[secretKey] = denied
	}
	for _, op := range ops {
		denied[op] = true
	}
}

// RestoreSecret undoes RevokeSecret and ForbidSecret for the secret key.
func (s *Server) RestoreSecret(secretKey string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.revoked, secretKey)
	delete(s.forbidden, secretKey)
}

// credentialError is the 401 or 403 the secret key gets for op, if any.
// Requires s.mu.
func (s *Server) credentialError(secretKey, op string) (int, *apiError) {
	switch {
	case s.revoked[secretKey]:
		return http.StatusUnauthorized, invalidKey(secretKey)
	case s.forbidden[secretKey][op]:
		return http.StatusForbidden, &apiError{Type: invalidRequest,
			Message: "The provided key '" + maskKey(secretKey) + "' does not have the required permissions for this endpoint on account " +
				accountID(secretKey) + ". Having the " + permissions[op] + " permission would allow this request to continue."}
	}
	return 0, nil
}

func invalidKey(key string) *apiError {
	return &apiError{Type: invalidRequest, Message: "Invalid API Key provided: " + maskKey(key)}
}

// maskKey hides a key the way Stripe's error messages do: the first eight
// and last four characters stay, the rest become asterisks.
func maskKey(key string) string {
	const head, tail = 8, 4
	if len(key) <= head+tail {
		return key[:min(len(key), head)] + strings.Repeat("*", max(len(key)-head, 0))
	}
	return key[:head] + strings.Repeat("*", len(key)-head-tail) + key[len(key)-tail:]
}

// accountID is the stable, Stripe-looking id of the account a secret key
// belongs to. As at Stripe, the secret key and the restricted keys of one
// account, test or live, share it: the account is the key's family, what
// follows sk_test_, sk_live_, rk_test_ or rk_live_.
func accountID(secretKey string) string {
	h := sha256.Sum256([]byte(keyFamily(secretKey)))
	return "acct_" + hex.EncodeToString(h[:8])
}

// AccountOf is the id GET /v1/account answers for the secret key.
func AccountOf(secretKey string) string { return accountID(secretKey) }

// keyFamily is the key without its kind and mode.
func keyFamily(key string) string {
	for _, prefix := range []string{"sk_test_", "sk_live_", "rk_test_", "rk_live_"} {
		if rest, ok := strings.CutPrefix(key, prefix); ok {
			return rest
		}
	}
	return key
}

// getAccount answers GET /v1/account: the account of the key it was
// called with.
func (s *Server) getAccount(a *account, _ *call) result {
	return okResult(map[string]any{"id": accountID(a.key), "object": "account", "type": "standard",
		"charges_enabled": true, "payouts_enabled": true, "details_submitted": true})
}
