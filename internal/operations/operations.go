// Package operations is what operators do to payments of any account:
// look at them and at the provider's view of them, list the stuck ones,
// replay or cancel one, and audit final payments against the provider and
// resolve the differences found. Every change runs on the money path of
// package payment, through its exported steps.
package operations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

// Store is the persistence operations read and write beside the money
// path's own.
type Store interface {
	// PaymentGetAnyAccount reads a payment of any account.
	PaymentGetAnyAccount(ctx context.Context, id string) (*payment.Payment, error)
	// PaymentListStuck pages payments of any account in the given statuses
	// by (updated_at, id), flagging those with an attempt unresolved since
	// before alertBefore.
	PaymentListStuck(ctx context.Context, q StuckQuery) ([]StuckPayment, error)
	AttemptListByPayment(ctx context.Context, paymentID string) ([]*payment.Attempt, error)
	AuditListByPayment(ctx context.Context, paymentID string) ([]payment.AuditEntry, error)
	AttemptListUnresolvedByPayment(ctx context.Context, paymentID string) ([]*payment.Attempt, error)

	// PaymentListFinalChanged pages final payments changed since a time.
	PaymentListFinalChanged(ctx context.Context, since time.Time, after StuckCursor, limit int) ([]*payment.Payment, error)
	// DiscrepancyUpsert inserts an open discrepancy or refreshes the open
	// one of its payment and kind (first_seen_at kept); false when an
	// operator already resolved this exact difference.
	DiscrepancyUpsert(ctx context.Context, d *payment.Discrepancy) (*payment.Discrepancy, bool, error)
	DiscrepancyGetByID(ctx context.Context, id string) (*payment.Discrepancy, error)
	DiscrepancyList(ctx context.Context, q DiscrepancyQuery) ([]*payment.Discrepancy, error)
	DiscrepancyCountOpen(ctx context.Context) (int64, error)
	// DiscrepancyClaim claims an open discrepancy for the resolve whose
	// key hashes to keyHash, until a time; payment.ErrNotFound when it is
	// resolved, holds a refund in flight, or another resolve's claim is
	// live.
	DiscrepancyClaim(ctx context.Context, id string, keyHash []byte, until, now time.Time) (*payment.Discrepancy, error)
	// DiscrepancyReleaseClaim ends that resolve's claim, if it holds one.
	DiscrepancyReleaseClaim(ctx context.Context, id string, keyHash []byte) error
}

// Config wires a Service. Zero durations take the contract's defaults.
type Config struct {
	Payments *payment.Service
	Store    Store
	// Provider is Stripe's adapter; Providers holds every adapter by
	// provider name, Provider included when it is set.
	Provider  provider.Provider
	Providers map[string]provider.Provider
	Accounts  payment.Accounts
	Logger    *slog.Logger
	// Now is the clock; nil reads the wall clock.
	Now payment.Clock
	// NewID makes ids such as dsc_…; nil is payment.NewID.
	NewID func(prefix string) string
	// Reconcile reconciles, now, a payment's unresolved attempts that
	// nobody holds: a replay decides on what the provider proved.
	Reconcile func(ctx context.Context, acct payment.Account, paymentID, actor, reason string) error

	ProviderTimeout time.Duration // PROVIDER_TIMEOUT
	Lease           time.Duration // IN_PROGRESS_LEASE: a resolve's claim
	AlertAfter      time.Duration // RECONCILE_ALERT_AFTER
	// AuditWindow is AUDIT_WINDOW: payments changed within it are audited.
	AuditWindow time.Duration
	// AuditRate is AUDIT_RATE: provider calls per second (0: no limit);
	// AuditBurst how many may go at once (default 1).
	AuditRate  float64
	AuditBurst int
	// AuditBatch is how many payments one page of the audit reads.
	AuditBatch int
}

// Service runs the operations.
type Service struct {
	payments        *payment.Service
	store           Store
	providers       map[string]provider.Provider
	accounts        payment.Accounts
	log             *slog.Logger
	now             payment.Clock
	newID           func(string) string
	reconcile       func(ctx context.Context, acct payment.Account, paymentID, actor, reason string) error
	providerTimeout time.Duration
	lease           time.Duration
	alertAfter      time.Duration
	window          time.Duration
	batch           int
	bucket          *tokenBucket
}

const (
	defaultAuditBatch  = 100
	defaultAuditWindow = 72 * time.Hour
)

// New checks its dependencies and applies defaults.
func New(c Config) (*Service, error) {
	providers := make(map[string]provider.Provider, len(c.Providers)+1)
	for name, p := range c.Providers {
		providers[name] = p
	}
	if c.Provider != nil {
		providers[payment.ProviderStripe] = c.Provider
	}
	if c.Payments == nil || c.Store == nil || providers[payment.ProviderStripe] == nil || c.Accounts == nil || c.Reconcile == nil {
		return nil, errors.New("operations: the payment service, a store, Stripe's provider, accounts and a reconcile are required")
	}
	s := &Service{payments: c.Payments, store: c.Store, providers: providers, accounts: c.Accounts, log: c.Logger,
		now: c.Now, newID: c.NewID, reconcile: c.Reconcile,
		providerTimeout: orDefault(c.ProviderTimeout, 10*time.Second),
		lease:           orDefault(c.Lease, 30*time.Second),
		alertAfter:      orDefault(c.AlertAfter, time.Hour),
		window:          orDefault(c.AuditWindow, defaultAuditWindow),
		batch:           c.AuditBatch,
		bucket:          newTokenBucket(c.AuditRate, c.AuditBurst),
	}
	if s.batch <= 0 {
		s.batch = defaultAuditBatch
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = payment.NewClock(nil)
	}
	if s.newID == nil {
		s.newID = payment.NewID
	}
	return s, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// at is a payment's provider with the account's credentials there.
type at struct {
	prov  provider.Provider
	creds provider.Credentials
}

// providerFor returns the payment's provider ("" is Stripe) and the
// account's credentials there; Stripe's fall back to acct.Credentials.
func (s *Service) providerFor(acct payment.Account, p *payment.Payment) (at, error) {
	name := payment.ProviderOf(p.Provider)
	prov, ok := s.providers[name]
	if !ok {
		return at{}, fmt.Errorf("%w: %s", payment.ErrNoProvider, name)
	}
	c, ok := acct.CredentialsFor(name)
	if !ok {
		if name != payment.ProviderStripe {
			return at{}, fmt.Errorf("%w: account %s has no credentials at %s", payment.ErrNoProvider, acct.ID, name)
		}
		c = acct.Credentials
	}
	return at{prov: prov, creds: c}, nil
}

// intent looks the payment up at its provider: by its provider id, else by
// a search (of its latest authorization attempt where the provider
// searches by attempt).
func (b at) intent(ctx context.Context, p *payment.Payment) (in *provider.Intent, searched bool, err error) {
	if p.ProviderPaymentID != "" {
		in, err = b.prov.RetrieveIntent(ctx, b.creds, p.ProviderPaymentID)
		return in, false, err
	}
	if as, ok := b.prov.(provider.AttemptSearcher); ok {
		in, err = as.SearchIntentByAttempt(ctx, b.creds, p.ID, p.Attempt)
		return in, true, err
	}
	in, err = b.prov.SearchIntentByPaymentID(ctx, b.creds, p.ID)
	return in, true, err
}
