package account

import (
	"strings"
	"testing"
)

func TestCheckStripeSecretKey(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_51HxYz", "rk_test_abcd", "rk_live_ab_cd"} {
		if err := CheckStripeSecretKey(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "sk_test_abcd ", "sk_test_abcd\n", " sk_test_abcd", "sk_test_ab cd", "sk_test_abcd\t", "sk_test_abcd\r\n",
		"sk_test_abc\u00a0d", "sk_test_abcd\x00", "sk_test_", "pk_test_abcd", "sk_abcd1234", "SK_TEST_abcd",
		"whsec_abcd", "sk_test_" + strings.Repeat("a", 248), "sk_test_ab-cd", "sk_test_ab/cd",
	} {
		err := CheckStripeSecretKey(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if len(bad) > 8 && strings.Contains(err.Error(), bad[8:]) {
			t.Errorf("the error echoes the secret: %v", err)
		}
	}
}

func TestCheckWebhookSecret(t *testing.T) {
	t.Parallel()
	if err := CheckWebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"whsec_abcd ", "whsec_abcd\n", "whsec_", "sk_test_abcd", "whsec_ab+cd", "Whsec_abcd"} {
		if CheckWebhookSecret(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
