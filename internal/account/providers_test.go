package account_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

const (
	mpToken  = "TEST-1234567890123456-010203-abcdef-987654321"
	mpSecret = "mpwhsec0123456789abcdef"
)

// An account with both providers gives the payment service both
// credentials, in the order they were added; its secrets survive a
// re-encryption under a new key.
func TestProvidersCreateBothAndReencrypt(t *testing.T) {
	t.Parallel()
	db := postgrestest.New(t)
	store := postgres.NewAccountStore(db)
	ctx := context.Background()
	old, err := account.NewService(store, encryptionKey, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := old.CreateWith(ctx, "Loja Dupla", account.Secrets{StripeSecret: "sk_test_both_one",
		MercadoPagoToken: mpToken + "1", MercadoPagoWebhookSecret: mpSecret})
	if err != nil {
		t.Fatal(err)
	}
	newKey := []byte("fedcba9876543210fedcba9876543210")
	s, err := account.NewService(store, newKey, time.Now, account.WithPreviousKey(encryptionKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reencrypt(ctx, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	fresh, err := account.NewService(store, newKey, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	m, err := fresh.Merchant(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Providers, []string{"stripe", "mercadopago"}) {
		t.Fatalf("providers %v, want [stripe mercadopago]", m.Providers)
	}
	if c, ok := m.CredentialsFor(payment.ProviderMercadoPago); !ok || c.SecretKey != mpToken+"1" {
		t.Fatalf("mercadopago credentials %+v %v", c, ok)
	}
	if c, ok := m.CredentialsFor(payment.ProviderStripe); !ok || c.SecretKey != a.StripeSecret {
		t.Fatalf("stripe credentials %+v %v", c, ok)
	}
	got, err := fresh.Get(ctx, a.ID)
	if err != nil || got.MercadoPagoWebhookSecret != mpSecret {
		t.Fatalf("webhook secret %q, %v", got.MercadoPagoWebhookSecret, err)
	}
}

// An account stored before several providers (providers empty) is Stripe
// alone; adding Mercado Pago puts it second.
func TestProvidersOldAccountIsStripeOnly(t *testing.T) {
	t.Parallel()
	db := postgrestest.New(t)
	s, err := account.NewService(postgres.NewAccountStore(db), encryptionKey, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, _, err := s.Create(ctx, "Loja Antiga", "sk_test_old_one", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE accounts SET providers = DEFAULT WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	m, err := s.Merchant(ctx, a.ID)
	if err != nil || !slices.Equal(m.Providers, []string{"stripe"}) || m.Credentials.SecretKey != "sk_test_old_one" {
		t.Fatalf("old account: %+v, %v", m, err)
	}
	sum, err := s.SetProvider(ctx, a.ID, "mercadopago", account.Secrets{MercadoPagoToken: mpToken + "2"})
	if err != nil || !slices.Equal(sum.Providers, []string{"stripe", "mercadopago"}) {
		t.Fatalf("after adding mercadopago: %+v, %v", sum, err)
	}
	// Replacing Stripe's keeps the order.
	sum, err = s.SetProvider(ctx, a.ID, "stripe", account.Secrets{StripeSecret: "sk_test_old_two"})
	if err != nil || !slices.Equal(sum.Providers, []string{"stripe", "mercadopago"}) {
		t.Fatalf("after replacing stripe: %+v, %v", sum, err)
	}
}

// No two accounts share a Mercado Pago access token, whether at creation
// or when one is added; an account may put its own back.
func TestProvidersMercadoPagoTokenUnique(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	one, _, err := s.CreateWith(ctx, "Uma", account.Secrets{MercadoPagoToken: mpToken + "3"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateWith(ctx, "Outra", account.Secrets{MercadoPagoToken: mpToken + "3"}); !errors.Is(err, account.ErrCredentialsInUse) {
		t.Fatalf("second account with the token: %v, want ErrCredentialsInUse", err)
	}
	two, _, err := s.CreateWith(ctx, "Duas", account.Secrets{MercadoPagoToken: mpToken + "4"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetProvider(ctx, two.ID, "mercadopago", account.Secrets{MercadoPagoToken: mpToken + "3"}); !errors.Is(err, account.ErrCredentialsInUse) {
		t.Fatalf("taking another account's token: %v, want ErrCredentialsInUse", err)
	}
	if _, err := s.SetProvider(ctx, one.ID, "mercadopago", account.Secrets{MercadoPagoToken: mpToken + "3"}); err != nil {
		t.Fatalf("putting its own token back: %v", err)
	}
	if _, _, err := s.CreateWith(ctx, "Nenhuma", account.Secrets{}); payment.ErrorCode(err) != payment.CodeInvalidRequest {
		t.Fatalf("no provider: %v, want invalid_request", err)
	}
}
