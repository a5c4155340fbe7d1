package account_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/account"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
)

var encryptionKey = []byte("0123456789abcdef0123456789abcdef")

// clock is a movable clock, so tests cross a grace period without sleeping.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func setup(t *testing.T) (*account.Service, *clock) {
	t.Helper()
	c := &clock{now: time.Now()}
	s, err := account.NewService(postgres.NewAccountStore(postgrestest.New(t)), encryptionKey, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestRotateAPIKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("OldKeyValidInGraceOnly", func(t *testing.T) {
		t.Parallel()
		s, c := setup(t)
		a, oldKey, err := s.Create(ctx, "Loja Um", "sk_test_rotate_1", "")
		if err != nil {
			t.Fatal(err)
		}
		newKey, until, err := s.RotateAPIKey(ctx, a.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if newKey == oldKey || !strings.HasPrefix(newKey, "psk_") {
			t.Fatalf("new key %q, old %q", newKey, oldKey)
		}
		if want := c.Now().Add(time.Hour); until.Sub(want).Abs() > time.Millisecond {
			t.Fatalf("old key valid until %v, want %v", until, want)
		}
		for name, k := range map[string]string{"old": oldKey, "new": newKey} {
			if got, err := s.Authenticate(ctx, k); err != nil || got.ID != a.ID {
				t.Fatalf("%s key within the grace: %v, %v", name, got.ID, err)
			}
		}
		// Just before the end the old key still works; cached, it is
		// never trusted past the end.
		c.Advance(time.Hour - time.Second)
		if _, err := s.Authenticate(ctx, oldKey); err != nil {
			t.Fatalf("old key 1s before the end: %v", err)
		}
		c.Advance(time.Second)
		if _, err := s.Authenticate(ctx, oldKey); !errors.Is(err, payment.ErrNotFound) {
			t.Fatalf("old key after the grace: %v, want not found", err)
		}
		if got, err := s.Authenticate(ctx, newKey); err != nil || got.ID != a.ID {
			t.Fatalf("new key after the grace: %v", err)
		}
	})

	t.Run("RotatingAgainEndsTheEarlierKeyAtOnce", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		a, first, err := s.Create(ctx, "Loja Dois", "sk_test_rotate_2", "")
		if err != nil {
			t.Fatal(err)
		}
		second, _, err := s.RotateAPIKey(ctx, a.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		third, _, err := s.RotateAPIKey(ctx, a.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, first); !errors.Is(err, payment.ErrNotFound) {
			t.Fatalf("first key after two rotations: %v, want not found", err)
		}
		for _, k := range []string{second, third} {
			if _, err := s.Authenticate(ctx, k); err != nil {
				t.Fatalf("key %s…: %v", k[:8], err)
			}
		}
	})

	t.Run("ZeroGraceEndsTheOldKeyNow", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		a, old, err := s.Create(ctx, "Loja Três", "sk_test_rotate_3", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.RotateAPIKey(ctx, a.ID, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, old); !errors.Is(err, payment.ErrNotFound) {
			t.Fatalf("old key with no grace: %v, want not found", err)
		}
	})

	t.Run("UnknownAccountIsNotFound", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		if _, _, err := s.RotateAPIKey(ctx, "acct_missing", time.Hour); !errors.Is(err, payment.ErrNotFound) {
			t.Fatalf("err = %v, want not found", err)
		}
		if _, _, err := s.RotateAPIKey(ctx, "acct_missing", -time.Second); payment.ErrorCode(err) != payment.CodeInvalidRequest {
			t.Fatalf("negative grace: %v, want invalid_request", err)
		}
	})
}

func TestList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := setup(t)
	a, key, err := s.Create(ctx, "Loja Um", "sk_test_list_secret", "whsec_list_secret")
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	b, _, err := s.Create(ctx, "Loja Dois", "sk_test_list_other", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RotateAPIKey(ctx, b.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != a.ID || list[1].ID != b.ID || !list[0].HasWebhookSecret || list[1].HasWebhookSecret {
		t.Fatalf("list = %+v", list)
	}
	if list[0].PreviousKeyExpiry != nil || list[1].PreviousKeyExpiry == nil || list[1].APIKeyRotatedAt == nil {
		t.Fatalf("rotation fields = %+v", list)
	}
	out, _ := json.Marshal(list)
	for _, secret := range []string{key, "sk_test_list", "whsec_list"} {
		if strings.Contains(string(out), secret) {
			t.Fatalf("listing shows a secret: %s", out)
		}
	}
}
