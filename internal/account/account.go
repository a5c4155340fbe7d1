// Package account manages tenants: their API keys (random, shown once,
// stored as a hash) and their provider credentials (encrypted at rest, and
// never shared between two accounts).
package account

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

// ErrCredentialsInUse: another account already holds these provider
// credentials. Sharing them would let two tenants' provider keys collide.
var ErrCredentialsInUse = payment.Errorf(payment.CodeCredentialsInUse, "these provider credentials belong to another account")

// Account is a tenant with its decrypted provider secrets.
type Account struct {
	ID            string
	Name          string
	StripeSecret  string
	WebhookSecret string
	CreatedAt     time.Time
}

// Payer is the account as the payment service sees it.
func (a Account) Payer() payment.Account {
	return payment.Account{ID: a.ID, Credentials: provider.Credentials{SecretKey: a.StripeSecret}}
}

// Row is an account as stored: secrets encrypted.
type Row struct {
	ID               string
	Name             string
	APIKeyHash       []byte
	StripeSecretEnc  []byte
	StripeSecretHMAC []byte
	WebhookSecretEnc []byte
	CreatedAt        time.Time
}

// Store persists accounts.
type Store interface {
	AccountInsert(ctx context.Context, r Row) error
	AccountByAPIKeyHash(ctx context.Context, hash []byte) (Row, error)
	AccountByID(ctx context.Context, id string) (Row, error)
	keyStore
}

// Service creates and authenticates accounts.
type Service struct {
	store Store
	// current seals; previous (ENCRYPTION_KEY_PREVIOUS, during a key
	// rotation) only opens what current cannot.
	current, previous *sealer
	now               func() time.Time
	// keys caches authenticated API keys by hash for cacheTTL: every
	// request authenticates, and accounts are never changed in place.
	keys sync.Map // string(hash) → cachedAccount
}

// cacheTTL bounds how long an authenticated key is trusted without a read.
const cacheTTL = 30 * time.Second

type cachedAccount struct {
	account Account
	until   time.Time
}

// NewService takes the 32-byte ENCRYPTION_KEY.
func NewService(store Store, encryptionKey []byte, now func() time.Time, opts ...Option) (*Service, error) {
	if store == nil {
		return nil, errors.New("account: store is required")
	}
	current, err := newSealer(encryptionKey)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	s := &Service{store: store, current: current, now: now}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Create makes an account and returns it with its API key, shown only now.
func (s *Service) Create(ctx context.Context, name, stripeSecret, webhookSecret string) (Account, string, error) {
	var fe []payment.FieldError
	if strings.TrimSpace(name) == "" || len(name) > 200 {
		fe = append(fe, payment.FieldError{Field: "name", Message: "is required (at most 200 characters)"})
	}
	// The command line reaches here without the API's strict decoder.
	if !payment.ValidText(name) || payment.ContainsCardNumber(name) {
		fe = append(fe, payment.FieldError{Field: "name", Message: "must be text without NUL characters or card numbers"})
	}
	if err := CheckStripeSecretKey(stripeSecret); err != nil {
		fe = append(fe, payment.FieldError{Field: "stripe_secret_key", Message: err.Error()})
	}
	if webhookSecret != "" {
		if err := CheckWebhookSecret(webhookSecret); err != nil {
			fe = append(fe, payment.FieldError{Field: "webhook_secret", Message: err.Error()})
		}
	}
	if len(fe) > 0 {
		return Account{}, "", &payment.Error{Code: payment.CodeInvalidRequest, Message: "the request has invalid fields", Fields: fe}
	}
	apiKey := "psk_" + randomToken(32)
	a := Account{ID: payment.NewID("acct"), Name: name, StripeSecret: stripeSecret,
		WebhookSecret: webhookSecret, CreatedAt: s.now().UTC().Truncate(time.Microsecond)}
	row := Row{ID: a.ID, Name: name, APIKeyHash: HashAPIKey(apiKey),
		StripeSecretEnc: s.current.seal(stripeSecret), StripeSecretHMAC: s.current.fingerprint(stripeSecret), CreatedAt: a.CreatedAt}
	if webhookSecret != "" {
		row.WebhookSecretEnc = s.current.seal(webhookSecret)
	}
	if s.previous != nil {
		// Accounts not yet re-encrypted carry the fingerprint under the
		// previous key, which the unique constraint cannot compare.
		taken, err := s.store.AccountSecretHMACExists(ctx, s.previous.fingerprint(stripeSecret))
		if err != nil {
			return Account{}, "", err
		}
		if taken {
			return Account{}, "", ErrCredentialsInUse
		}
	}
	if err := s.store.AccountInsert(ctx, row); err != nil {
		return Account{}, "", err
	}
	return a, apiKey, nil
}

// Authenticate finds the account of an API key.
func (s *Service) Authenticate(ctx context.Context, apiKey string) (Account, error) {
	if apiKey == "" {
		return Account{}, payment.ErrNotFound
	}
	hash := HashAPIKey(apiKey)
	if c, ok := s.keys.Load(string(hash)); ok && time.Now().Before(c.(cachedAccount).until) {
		return c.(cachedAccount).account, nil
	}
	row, err := s.store.AccountByAPIKeyHash(ctx, hash)
	if err != nil {
		return Account{}, err
	}
	a, err := s.open(row)
	if err == nil {
		s.keys.Store(string(hash), cachedAccount{account: a, until: time.Now().Add(cacheTTL)})
	}
	return a, err
}

// Get returns an account by id.
func (s *Service) Get(ctx context.Context, id string) (Account, error) {
	row, err := s.store.AccountByID(ctx, id)
	if err != nil {
		return Account{}, err
	}
	return s.open(row)
}

// Payer returns an account as the payment service sees it, for background
// work where no API key authenticated a caller.
func (s *Service) Payer(ctx context.Context, id string) (payment.Account, error) {
	a, err := s.Get(ctx, id)
	if err != nil {
		return payment.Account{}, err
	}
	return a.Payer(), nil
}

func (s *Service) open(r Row) (Account, error) {
	a := Account{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt}
	var err error
	if a.StripeSecret, _, err = s.unseal(r.StripeSecretEnc); err != nil {
		return Account{}, fmt.Errorf("account %s: decrypt provider secret: %w", r.ID, err)
	}
	if r.WebhookSecretEnc != nil {
		if a.WebhookSecret, _, err = s.unseal(r.WebhookSecretEnc); err != nil {
			return Account{}, fmt.Errorf("account %s: decrypt webhook secret: %w", r.ID, err)
		}
	}
	return a, nil
}

// HashAPIKey is what is stored for an API key. The key has 256 random bits,
// so a fast hash is enough.
func HashAPIKey(k string) []byte {
	h := sha256.Sum256([]byte(k))
	return h[:]
}

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
