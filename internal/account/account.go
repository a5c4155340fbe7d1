// Package account manages tenants: their API keys (random, shown once,
// stored as a hash) and their provider credentials (encrypted at rest, and
// never shared between two accounts).
package account

import (
	"context"
	"crypto/hmac"
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
	// Mercado Pago's access token and webhook secret; "" when none.
	MercadoPagoToken         string
	MercadoPagoWebhookSecret string
	// Providers the account has credentials for, in the order added.
	Providers []string
	// Routing chooses the providers of each create; nil when none is set.
	Routing   *payment.Routing
	CreatedAt time.Time
	// merchant is Merchant built once when the account is opened: every
	// request of the account asks for it. Read-only, shared by them all.
	merchant *payment.Account
}

// Merchant is the account as the payment service sees it: the merchant
// that charges, with the provider credentials it charges through.
func (a Account) Merchant() payment.Account {
	if a.merchant != nil {
		return *a.merchant
	}
	return a.buildMerchant()
}

func (a Account) buildMerchant() payment.Account {
	m := payment.Account{ID: a.ID, Credentials: provider.Credentials{SecretKey: a.StripeSecret},
		Providers: append([]string(nil), a.Providers...), ProviderCredentials: map[string]provider.Credentials{},
		Routing: a.Routing}
	for _, p := range a.Providers {
		switch p {
		case payment.ProviderStripe:
			m.ProviderCredentials[p] = provider.Credentials{SecretKey: a.StripeSecret}
		case payment.ProviderMercadoPago:
			m.ProviderCredentials[p] = provider.Credentials{SecretKey: a.MercadoPagoToken}
		}
	}
	return m
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
	// StripeAccountID is the provider account the secret key belongs to,
	// as the provider answered at registration; "" for accounts registered
	// before it was asked.
	StripeAccountID string
	// The key replaced by the last rotation, accepted until
	// PreviousAPIKeyExpiresAt; nil when there is none.
	PreviousAPIKeyHash      []byte
	PreviousAPIKeyExpiresAt time.Time
	APIKeyRotatedAt         time.Time
	// Mercado Pago's access token (sealed, and its fingerprint) and
	// webhook secret (sealed); nil when none.
	MercadoPagoTokenEnc         []byte
	MercadoPagoTokenHMAC        []byte
	MercadoPagoWebhookSecretEnc []byte
	// Providers in the order added; empty for accounts stored before
	// there was a choice: Stripe alone.
	Providers []string
	// Routing is the payment.Routing as JSON; nil when none is set.
	Routing []byte
}

// Store persists accounts.
type Store interface {
	AccountInsert(ctx context.Context, r Row) error
	AccountGetByAPIKeyHash(ctx context.Context, hash []byte) (Row, error)
	AccountGetByID(ctx context.Context, id string) (Row, error)
	AccountList(ctx context.Context) ([]Row, error)
	// AccountRotateAPIKey makes newHash the current key and the current
	// one the previous key, accepted until previousExpiresAt.
	AccountRotateAPIKey(ctx context.Context, id string, newHash []byte, previousExpiresAt, rotatedAt time.Time) (Row, error)
	// AccountSetStripeAccountID records the provider account of an account
	// that has none yet; false when it already had one.
	AccountSetStripeAccountID(ctx context.Context, id, stripeAccountID string) (bool, error)
	// AccountUpdateProviders locks the account's row and stores the
	// provider columns of what update returns.
	AccountUpdateProviders(ctx context.Context, id string, update func(Row) (Row, error)) (Row, error)
	// AccountUpdateRouting locks the account's row and stores the routing
	// JSON update returns.
	AccountUpdateRouting(ctx context.Context, id string, update func(Row) ([]byte, error)) (Row, error)
	keyStore
}

// Service creates and authenticates accounts.
type Service struct {
	store Store
	// current seals; previous (ENCRYPTION_KEY_PREVIOUS, during a key
	// rotation) only opens what current cannot.
	current, previous *sealer
	now               func() time.Time
	// owners, when set, tells which provider account a secret key
	// belongs to, asked at every registration.
	owners ProviderAccounts
	// keys caches authenticated API keys by hash for cacheTTL: every
	// request authenticates, and an account's secrets never change in
	// place (a rotated key's grace is far longer than the cache).
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

// Create makes an account with Stripe credentials and returns it with its
// API key, shown only now.
func (s *Service) Create(ctx context.Context, name, stripeSecret, webhookSecret string) (Account, string, error) {
	return s.CreateWith(ctx, name, Secrets{StripeSecret: stripeSecret, WebhookSecret: webhookSecret})
}

// CreateWith makes an account with one or more providers' credentials and
// returns it with its API key, shown only now.
func (s *Service) CreateWith(ctx context.Context, name string, sec Secrets) (Account, string, error) {
	var fe []payment.FieldError
	if strings.TrimSpace(name) == "" || len(name) > 200 {
		fe = append(fe, payment.FieldError{Field: "name", Message: "is required (at most 200 characters)"})
	}
	// The command line reaches here without the API's strict decoder.
	if !payment.ValidText(name) || payment.ContainsCardNumber(name) {
		fe = append(fe, payment.FieldError{Field: "name", Message: "must be text without NUL characters or card numbers"})
	}
	fe = append(fe, sec.check()...)
	if len(fe) > 0 {
		return Account{}, "", invalidFields(fe)
	}
	var err error
	apiKey := "psk_" + randomToken(32)
	a := Account{ID: payment.NewID("acct"), Name: name, StripeSecret: sec.StripeSecret, WebhookSecret: sec.WebhookSecret,
		MercadoPagoToken: sec.MercadoPagoToken, MercadoPagoWebhookSecret: sec.MercadoPagoWebhookSecret,
		CreatedAt: s.now().UTC().Truncate(time.Microsecond)}
	row := Row{ID: a.ID, Name: name, APIKeyHash: HashAPIKey(apiKey), CreatedAt: a.CreatedAt, Providers: []string{}}
	if sec.StripeSecret != "" {
		if row.StripeAccountID, err = s.providerAccount(ctx, sec.StripeSecret); err != nil {
			return Account{}, "", err
		}
		row = s.sealStripe(row, sec)
	}
	if sec.MercadoPagoToken != "" {
		row = s.sealMercadoPago(row, sec)
	}
	a.Providers = row.Providers
	if err := s.checkPreviousFingerprints(ctx, sec, ""); err != nil {
		return Account{}, "", err
	}
	if err := s.store.AccountInsert(ctx, row); err != nil {
		return Account{}, "", err
	}
	return a, apiKey, nil
}

// ProviderAccounts tells which provider account credentials belong to.
type ProviderAccounts interface {
	// AccountID returns the account's id, provider.ErrCredentialsRefused
	// when the provider refuses the credentials, or another error when it
	// could not be asked.
	AccountID(ctx context.Context, c provider.Credentials) (string, error)
}

// WithProviderAccounts makes Create ask p which provider account a secret
// key belongs to, and refuse a key of an account another one registered
// (a secret key and a restricted key of one Stripe account differ, so
// comparing the keys cannot see it).
func WithProviderAccounts(p ProviderAccounts) Option {
	return func(s *Service) error {
		s.owners = p
		return nil
	}
}

// ErrProviderUnreachable: the provider could not be asked which account
// a key belongs to; registering again later may work.
var ErrProviderUnreachable = payment.Errorf(payment.CodeUnavailable, "the provider could not be asked which account the key belongs to; try again")

// providerAccount asks the provider which account stripeSecret belongs
// to; "" without WithProviderAccounts.
func (s *Service) providerAccount(ctx context.Context, stripeSecret string) (string, error) {
	if s.owners == nil {
		return "", nil
	}
	id, err := s.owners.AccountID(ctx, provider.Credentials{SecretKey: stripeSecret})
	switch {
	case errors.Is(err, provider.ErrCredentialsRefused):
		return "", &payment.Error{Code: payment.CodeInvalidRequest, Message: "the request has invalid fields",
			Fields: []payment.FieldError{{Field: "stripe_secret_key", Message: "was refused by the provider"}}}
	case err != nil:
		return "", ErrProviderUnreachable
	case id == "":
		return "", ErrProviderUnreachable
	}
	return id, nil
}

// Authenticate finds the account of an API key.
func (s *Service) Authenticate(ctx context.Context, apiKey string) (Account, error) {
	if apiKey == "" {
		return Account{}, payment.ErrNotFound
	}
	hash := HashAPIKey(apiKey)
	now := s.now()
	if c, ok := s.keys.Load(string(hash)); ok && now.Before(c.(cachedAccount).until) {
		return c.(cachedAccount).account, nil
	}
	row, err := s.store.AccountGetByAPIKeyHash(ctx, hash)
	if err != nil {
		return Account{}, err
	}
	until := now.Add(cacheTTL)
	if !hmac.Equal(row.APIKeyHash, hash) {
		// The previous key of a rotation: valid only in its grace period,
		// and never cached past it.
		if !now.Before(row.PreviousAPIKeyExpiresAt) {
			return Account{}, payment.ErrNotFound
		}
		if row.PreviousAPIKeyExpiresAt.Before(until) {
			until = row.PreviousAPIKeyExpiresAt
		}
	}
	a, err := s.open(row)
	if err == nil {
		s.keys.Store(string(hash), cachedAccount{account: a, until: until})
	}
	return a, err
}

// DefaultRotationGrace is how long a replaced API key stays valid unless
// the operator chooses otherwise: a day, time to roll the new key out.
const DefaultRotationGrace = 24 * time.Hour

// RotateAPIKey gives an account a new API key, shown only now. The old key
// stays valid for grace (zero ends it at once, except in the up to 30 s an
// instance trusts a key it has just checked); a key replaced earlier stops
// at once.
func (s *Service) RotateAPIKey(ctx context.Context, id string, grace time.Duration) (apiKey string, oldValidUntil time.Time, err error) {
	if grace < 0 {
		return "", time.Time{}, payment.Errorf(payment.CodeInvalidRequest, "the grace period must not be negative")
	}
	apiKey = "psk_" + randomToken(32)
	now := s.now().UTC().Truncate(time.Microsecond)
	row, err := s.store.AccountRotateAPIKey(ctx, id, HashAPIKey(apiKey), now.Add(grace), now)
	if err != nil {
		return "", time.Time{}, err
	}
	return apiKey, row.PreviousAPIKeyExpiresAt, nil
}

// Summary is an account without its secrets, for listings.
// HasWebhookSecret says a webhook secret is set at one provider at least,
// so that provider's webhooks are taken.
type Summary struct {
	ID                string     `json:"id"`
	Name              string     `json:"name"`
	CreatedAt         time.Time  `json:"created_at"`
	HasWebhookSecret  bool       `json:"has_webhook_secret"`
	APIKeyRotatedAt   *time.Time `json:"api_key_rotated_at,omitempty"`
	PreviousKeyExpiry *time.Time `json:"previous_api_key_valid_until,omitempty"`
	// Providers the account has credentials for, in the order added.
	Providers []string `json:"providers"`
}

// List returns every account, oldest first, without secrets: it decrypts
// nothing. A previous key whose grace has ended is not shown.
func (s *Service) List(ctx context.Context) ([]Summary, error) {
	rows, err := s.store.AccountList(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]Summary, 0, len(rows))
	for _, r := range rows {
		out = append(out, summarize(r, now))
	}
	return out, nil
}

func summarize(r Row, now time.Time) Summary {
	sum := Summary{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt.UTC(), HasWebhookSecret: r.WebhookSecretEnc != nil || r.MercadoPagoWebhookSecretEnc != nil,
		Providers: r.providers()}
	if !r.APIKeyRotatedAt.IsZero() {
		t := r.APIKeyRotatedAt.UTC()
		sum.APIKeyRotatedAt = &t
	}
	if r.PreviousAPIKeyHash != nil && now.Before(r.PreviousAPIKeyExpiresAt) {
		t := r.PreviousAPIKeyExpiresAt.UTC()
		sum.PreviousKeyExpiry = &t
	}
	return sum
}

// Summary returns one account without its secrets; it decrypts nothing.
func (s *Service) Summary(ctx context.Context, id string) (Summary, error) {
	row, err := s.store.AccountGetByID(ctx, id)
	if err != nil {
		return Summary{}, err
	}
	return summarize(row, s.now()), nil
}

// Get returns an account by id.
func (s *Service) Get(ctx context.Context, id string) (Account, error) {
	row, err := s.store.AccountGetByID(ctx, id)
	if err != nil {
		return Account{}, err
	}
	return s.open(row)
}

// Merchant returns an account as the payment service sees it, for background
// work where no API key authenticated a caller.
func (s *Service) Merchant(ctx context.Context, id string) (payment.Account, error) {
	a, err := s.Get(ctx, id)
	if err != nil {
		return payment.Account{}, err
	}
	return a.Merchant(), nil
}

func (s *Service) open(r Row) (Account, error) {
	a := Account{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt, Providers: r.providers()}
	for _, f := range []struct {
		sealed []byte
		plain  *string
		what   string
	}{
		{r.StripeSecretEnc, &a.StripeSecret, "provider secret"},
		{r.WebhookSecretEnc, &a.WebhookSecret, "webhook secret"},
		{r.MercadoPagoTokenEnc, &a.MercadoPagoToken, "Mercado Pago access token"},
		{r.MercadoPagoWebhookSecretEnc, &a.MercadoPagoWebhookSecret, "Mercado Pago webhook secret"},
	} {
		if f.sealed == nil {
			continue
		}
		var err error
		if *f.plain, _, err = s.unseal(f.sealed); err != nil {
			return Account{}, fmt.Errorf("account %s: decrypt %s: %w", r.ID, f.what, err)
		}
	}
	var err error
	if a.Routing, err = r.routing(); err != nil {
		return Account{}, err
	}
	m := a.buildMerchant()
	a.merchant = &m
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
