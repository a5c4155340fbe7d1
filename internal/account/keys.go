package account

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/payment"
)

// keyStore is what key checks and rotation need from the store.
type keyStore interface {
	AccountGetFirst(ctx context.Context) (Row, error)
	AccountListIDsAfter(ctx context.Context, after string, n int) ([]string, error)
	// AccountIDBySecretHMAC and AccountIDByMercadoPagoHMAC return the
	// account holding a secret with this fingerprint, or "".
	AccountIDBySecretHMAC(ctx context.Context, hmac []byte) (string, error)
	AccountIDByMercadoPagoHMAC(ctx context.Context, hmac []byte) (string, error)
	// AccountReseal locks the row, passes it to reseal and stores the
	// result when reseal reports a change.
	AccountReseal(ctx context.Context, id string, reseal func(Row) (Row, bool, error)) (bool, error)
	EncryptionCanaryGet(ctx context.Context) ([]byte, error)
	EncryptionCanaryInsert(ctx context.Context, sealed []byte, at time.Time) error
	CanaryReseal(ctx context.Context, at time.Time, reseal func([]byte) ([]byte, bool, error)) (bool, error)
}

// Option adjusts a Service.
type Option func(*Service) error

// WithPreviousKey adds ENCRYPTION_KEY_PREVIOUS: secrets sealed with it are
// still opened, while everything new is sealed with the current key, until
// `payments accounts reencrypt` has moved every secret to the current key.
func WithPreviousKey(key []byte) Option {
	return func(s *Service) error {
		if len(key) == 0 {
			return nil
		}
		p, err := newSealer(key)
		if err != nil {
			return fmt.Errorf("account: previous key: %w", err)
		}
		s.previous = p
		return nil
	}
}

// sealer is one ENCRYPTION_KEY: AES-256-GCM for secrets at rest, and an
// HMAC key derived from it for credential fingerprints.
type sealer struct {
	aead cipher.AEAD
	mac  []byte
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, errors.New("account: the encryption key must be 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	// A key derived for fingerprints, so the HMAC never reuses the AES key.
	m := hmac.New(sha256.New, key)
	m.Write([]byte("provider-credential-fingerprint"))
	return &sealer{aead: aead, mac: m.Sum(nil)}, nil
}

func (k *sealer) fingerprint(secret string) []byte {
	m := hmac.New(sha256.New, k.mac)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

func (k *sealer) seal(plain string) []byte {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	return k.aead.Seal(nonce, nonce, []byte(plain), nil)
}

func (k *sealer) open(b []byte) (string, error) {
	n := k.aead.NonceSize()
	if len(b) < n {
		return "", errors.New("ciphertext too short")
	}
	out, err := k.aead.Open(nil, b[:n], b[n:], nil)
	return string(out), err
}

// unseal opens b with the current key, else the previous one; current
// says which did.
func (s *Service) unseal(b []byte) (plain string, current bool, err error) {
	if plain, err = s.current.open(b); err == nil {
		return plain, true, nil
	}
	if s.previous != nil {
		if plain, perr := s.previous.open(b); perr == nil {
			return plain, false, nil
		}
	}
	return "", false, err
}

// canaryText is what the canary holds. GCM authenticates, so opening it at
// all proves the key; the text only makes a mix-up with another value
// impossible.
const canaryText = "acmepay-payments-encryption-canary-v1"

// ErrWrongKey: ENCRYPTION_KEY (and ENCRYPTION_KEY_PREVIOUS, if set) does
// not open what is stored.
var ErrWrongKey = errors.New("ENCRYPTION_KEY does not decrypt the stored provider secrets: it is not the key this database was encrypted with " +
	"(to rotate keys, set the old key as ENCRYPTION_KEY_PREVIOUS and run `payments accounts reencrypt`)")

// CheckKey proves at start-up that the keys open the stored secrets, so a
// wrong but well-formed ENCRYPTION_KEY stops the instance instead of
// failing every call that needs a provider secret. The canary is created
// on first use; a database that has accounts but no canary yet (from
// before the canary) is checked against its first account's secret first.
// It reports whether the previous key was needed (a rotation is not
// finished).
func (s *Service) CheckKey(ctx context.Context) (rotating bool, err error) {
	sealed, err := s.store.EncryptionCanaryGet(ctx)
	if errors.Is(err, payment.ErrNotFound) {
		if err := s.checkFirstAccount(ctx); err != nil {
			return false, err
		}
		if err := s.store.EncryptionCanaryInsert(ctx, s.current.seal(canaryText), s.now().UTC()); err != nil {
			return false, err
		}
		// Read back: a concurrent first start may have stored its own.
		sealed, err = s.store.EncryptionCanaryGet(ctx)
	}
	if err != nil {
		return false, fmt.Errorf("encryption canary: %w", err)
	}
	text, current, err := s.unseal(sealed)
	if err != nil || text != canaryText {
		return false, ErrWrongKey
	}
	return !current, nil
}

func (s *Service) checkFirstAccount(ctx context.Context) error {
	r, err := s.store.AccountGetFirst(ctx)
	if errors.Is(err, payment.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("encryption canary: %w", err)
	}
	sealed := r.StripeSecretEnc
	if sealed == nil {
		sealed = r.MercadoPagoTokenEnc
	}
	if _, _, err := s.unseal(sealed); err != nil {
		return ErrWrongKey
	}
	return nil
}

// ReencryptSummary counts what Reencrypt did.
type ReencryptSummary struct {
	Examined    int  `json:"examined"`
	Reencrypted int  `json:"reencrypted"`
	Canary      bool `json:"canary_reencrypted"`
}

// Reencrypt moves every stored secret, its fingerprint and the canary to
// the current key. Each account is re-sealed under its row lock and only
// when something is not yet under the current key, so running it twice,
// or twice at once, changes each row once. A secret neither key opens
// stops it with an error.
func (s *Service) Reencrypt(ctx context.Context, log *slog.Logger) (ReencryptSummary, error) {
	var sum ReencryptSummary
	if _, err := s.CheckKey(ctx); err != nil {
		return sum, err
	}
	for after := ""; ; {
		ids, err := s.store.AccountListIDsAfter(ctx, after, 100)
		if err != nil {
			return sum, err
		}
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			changed, err := s.store.AccountReseal(ctx, id, s.resealAccount)
			if err != nil {
				return sum, fmt.Errorf("account %s: %w", id, err)
			}
			sum.Examined++
			if changed {
				sum.Reencrypted++
				if log != nil {
					log.InfoContext(ctx, "account secrets re-encrypted", slog.String("account_id", id))
				}
			}
		}
		after = ids[len(ids)-1]
	}
	changed, err := s.store.CanaryReseal(ctx, s.now().UTC(), func(b []byte) ([]byte, bool, error) {
		text, current, err := s.unseal(b)
		if err != nil || text != canaryText {
			return nil, false, ErrWrongKey
		}
		if current {
			return nil, false, nil
		}
		return s.current.seal(canaryText), true, nil
	})
	sum.Canary = changed
	return sum, err
}

// resealAccount returns r with every secret under the current key, and
// whether anything changed.
func (s *Service) resealAccount(r Row) (Row, bool, error) {
	changed := false
	for _, f := range []struct {
		sealed, fingerprint *[]byte
		what                string
	}{
		{&r.StripeSecretEnc, &r.StripeSecretHMAC, "provider secret"},
		{&r.WebhookSecretEnc, nil, "webhook secret"},
		{&r.MercadoPagoTokenEnc, &r.MercadoPagoTokenHMAC, "Mercado Pago access token"},
		{&r.MercadoPagoWebhookSecretEnc, nil, "Mercado Pago webhook secret"},
	} {
		if *f.sealed == nil {
			continue
		}
		plain, current, err := s.unseal(*f.sealed)
		if err != nil {
			return r, false, fmt.Errorf("decrypt %s: %w", f.what, ErrWrongKey)
		}
		if !current {
			*f.sealed = s.current.seal(plain)
			changed = true
		}
		if f.fingerprint == nil {
			continue
		}
		if fp := s.current.fingerprint(plain); !hmac.Equal(fp, *f.fingerprint) {
			*f.fingerprint = fp
			changed = true
		}
	}
	return r, changed, nil
}

// Seal encrypts a secret of another feature (a webhook endpoint's signing
// secret) with the current ENCRYPTION_KEY, like provider secrets.
func (s *Service) Seal(plain string) []byte { return s.current.seal(plain) }

// Open decrypts what Seal returned, with the current key or the previous
// one during a key rotation.
func (s *Service) Open(sealed []byte) (string, error) {
	plain, _, err := s.unseal(sealed)
	return plain, err
}
