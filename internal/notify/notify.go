// Package notify delivers events to the merchant's own systems: webhook
// endpoints, their signing secrets, and the delivery of each event to each
// matching endpoint, signed per Standard Webhooks, at least once (CONTRACT
// §13). The jobs are River's, enqueued in the transaction that writes the
// event (see postgres.PaymentStore), so a change that rolls back sends
// nothing and a committed one is never lost.
package notify

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/payment"
)

// Endpoint statuses.
const (
	StatusEnabled  = "enabled"
	StatusDisabled = "disabled"
)

// MaxEndpoints is how many endpoints an account may have (as Stripe);
// deleted ones do not count.
const MaxEndpoints = 16

// ErrTooManyEndpoints is a creation beyond MaxEndpoints.
var ErrTooManyEndpoints = payment.Errorf(payment.CodeLimitExceeded,
	"an account has at most 16 webhook endpoints; delete one before creating another")

// RotationOverlap is how long the secret before a rotation keeps signing.
const RotationOverlap = 24 * time.Hour

// Endpoint is a merchant's webhook endpoint.
type Endpoint struct {
	ID            string
	AccountID     string
	URL           string
	EnabledEvents []string
	Description   string
	Status        string
	// Secret is filled only in the answers that show it: creation and
	// rotation.
	Secret            string
	SecretEnc         []byte
	PreviousSecretEnc []byte
	PreviousExpiresAt *time.Time
	CreateKeyHash     []byte
	CreateFingerprint []byte
	RotateKeyHash     []byte
	FailingSince      *time.Time
	CreatedAt         time.Time
	UpdatedAt         time.Time
	// SameURL is filled only in a creation's answer: the account's other
	// endpoints with this URL, each signing with its own secret.
	SameURL []string
}

// view is the public JSON shape.
type view struct {
	ID            string   `json:"id"`
	Object        string   `json:"object"`
	URL           string   `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Description   string   `json:"description"`
	Status        string   `json:"status"`
	Secret        *string  `json:"secret,omitempty"`
	SameURL       []string `json:"same_url_endpoints,omitzero"`
	CreatedAt     string   `json:"created_at"`
	UpdatedAt     string   `json:"updated_at"`
}

// View is what the API answers.
func (e *Endpoint) View() any {
	v := view{ID: e.ID, Object: "webhook_endpoint", URL: e.URL, EnabledEvents: e.EnabledEvents,
		Description: e.Description, Status: e.Status,
		CreatedAt: payment.FormatTime(e.CreatedAt), UpdatedAt: payment.FormatTime(e.UpdatedAt)}
	if e.Secret != "" {
		v.Secret = &e.Secret
	}
	v.SameURL = e.SameURL
	return v
}

// AdminView is the admin API's shape: the account beside the endpoint,
// never a secret.
func (e *Endpoint) AdminView() any {
	v := e.View().(view)
	v.Secret = nil
	return struct {
		view
		AccountID string `json:"account_id"`
	}{v, e.AccountID}
}

// Attempt is one HTTP attempt of a delivery.
type Attempt struct {
	ID         int64
	AccountID  string
	EndpointID string
	EventID    string
	At         time.Time
	StatusCode int
	Duration   time.Duration
	Outcome    string
	Response   string
}

// Attempt outcomes.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeRetrying  = "retrying"
	OutcomeFailed    = "failed"
)

// View is what the API answers.
func (a Attempt) View() any {
	var code *int
	if a.StatusCode != 0 {
		code = &a.StatusCode
	}
	return struct {
		ID         int64  `json:"id"`
		Object     string `json:"object"`
		EndpointID string `json:"webhook_endpoint_id"`
		EventID    string `json:"event_id"`
		At         string `json:"at"`
		StatusCode *int   `json:"status_code"`
		DurationMS int64  `json:"duration_ms"`
		Outcome    string `json:"outcome"`
		Response   string `json:"response"`
	}{a.ID, "webhook_attempt", a.EndpointID, a.EventID, payment.FormatTime(a.At), code,
		a.Duration.Milliseconds(), a.Outcome, a.Response}
}

// Store is the persistence of endpoints and attempts.
type Store interface {
	// EndpointInsert stores e unless the account already has an endpoint
	// created with the same key; then it returns that one and false. An
	// account that already has limit endpoints gets ErrTooManyEndpoints;
	// concurrent creations are counted one after the other.
	EndpointInsert(ctx context.Context, e *Endpoint, limit int) (*Endpoint, bool, error)
	WebhookEndpointGet(ctx context.Context, accountID, id string) (*Endpoint, error)
	// WebhookEndpointGetAny reads an endpoint of any account, deleted ones too.
	WebhookEndpointGetAny(ctx context.Context, id string) (*Endpoint, error)
	WebhookEndpointList(ctx context.Context, accountID, after string, limit int) ([]*Endpoint, error)
	// WebhookEndpointIDsByURL names the account's other live endpoints
	// with this URL.
	WebhookEndpointIDsByURL(ctx context.Context, accountID, url, exceptID string) ([]string, error)
	WebhookEndpointUpdate(ctx context.Context, e *Endpoint, now time.Time) (*Endpoint, error)
	WebhookEndpointDelete(ctx context.Context, accountID, id string, now time.Time) error
	WebhookEndpointRotate(ctx context.Context, accountID, id string, secretEnc, keyHash []byte, previousExpiresAt, now time.Time) (*Endpoint, error)
	WebhookAttemptsByEndpoint(ctx context.Context, accountID, endpointID string, after int64, limit int) ([]Attempt, error)
	WebhookAttemptsByEvent(ctx context.Context, accountID, eventID string, after int64, limit int) ([]Attempt, error)
	// Redeliver enqueues the event again to every enabled endpoint that
	// takes it, except where a delivery of it is still waiting or running;
	// ErrNotFound for an unknown event.
	Redeliver(ctx context.Context, accountID, eventID string) error

	// Admin reads and actions, across accounts.
	WebhookEndpointListAll(ctx context.Context, after string, limit int) ([]*Endpoint, error)
	// EventAccount is the account of an event; ErrNotFound for none.
	EventAccount(ctx context.Context, eventID string) (string, error)
	// RedeliverAudited is Redeliver for any account's event, with its audit
	// entry in the same transaction; it returns the event's account.
	RedeliverAudited(ctx context.Context, eventID string, a DeliveryAuditEntry) (string, error)
}

// DeliveryAuditEntry is an admin action on merchant webhook deliveries:
// who acted and why (a payment's own trail is payment.AuditEntry).
type DeliveryAuditEntry struct {
	At     time.Time
	Actor  string
	Action string
	Reason string
}

// Sealer encrypts signing secrets at rest (the account service's key).
type Sealer interface {
	Seal(plain string) []byte
	Open(sealed []byte) (string, error)
}

// Service manages endpoints.
type Service struct {
	store Store
	seal  Sealer
	guard Guard
	now   func() time.Time
}

// NewService checks its dependencies.
func NewService(store Store, seal Sealer, guard Guard, now func() time.Time) (*Service, error) {
	if store == nil || seal == nil {
		return nil, errors.New("notify: store and sealer are required")
	}
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, seal: seal, guard: guard, now: now}, nil
}

// EndpointRequest is the body of a creation or an update; nil fields of an
// update keep their value.
type EndpointRequest struct {
	URL           *string   `json:"url"`
	EnabledEvents *[]string `json:"enabled_events"`
	Description   *string   `json:"description"`
	// Enabled is for updates only.
	Enabled *bool `json:"enabled"`
}

// EventTypes are the types an endpoint may ask for.
var EventTypes = []string{
	"payment.processing", "payment.unknown", "payment.requires_action", "payment.pending",
	"payment.authorized", "payment.captured", "payment.declined", "payment.failed",
	"payment.canceled", "payment.refunded", "payment.capture_failed", "payment.cancel_failed",
	"payment.refund_failed", "payment.disputed", "payment.dispute_closed",
	"webhook_endpoint.disabled",
}

func (s *Service) check(ctx context.Context, r EndpointRequest, create bool) error {
	var fe []payment.FieldError
	if r.URL != nil || create {
		if r.URL == nil {
			fe = append(fe, payment.FieldError{Field: "url", Message: "is required"})
		} else if err := s.guard.CheckURL(ctx, *r.URL); err != nil {
			msg := err.Error()
			if errors.Is(err, ErrAddressRefused) {
				msg = "must resolve to public addresses only (no loopback, private, link-local or metadata address)"
			}
			fe = append(fe, payment.FieldError{Field: "url", Message: msg})
		}
	}
	if r.EnabledEvents != nil || create {
		switch {
		case r.EnabledEvents == nil || len(*r.EnabledEvents) == 0 || len(*r.EnabledEvents) > len(EventTypes):
			fe = append(fe, payment.FieldError{Field: "enabled_events", Message: `must list event types, or be ["*"]`})
		case slices.Contains(*r.EnabledEvents, "*") && len(*r.EnabledEvents) != 1:
			fe = append(fe, payment.FieldError{Field: "enabled_events", Message: `"*" stands alone`})
		default:
			for _, t := range *r.EnabledEvents {
				if t != "*" && !slices.Contains(EventTypes, t) {
					fe = append(fe, payment.FieldError{Field: "enabled_events", Message: "has an unknown event type"})
					break
				}
			}
		}
	}
	if r.Description != nil && (len(*r.Description) > 500 || !payment.ValidText(*r.Description) || payment.ContainsCardNumber(*r.Description)) {
		fe = append(fe, payment.FieldError{Field: "description", Message: "must be text of at most 500 characters"})
	}
	if create && r.Enabled != nil {
		fe = append(fe, payment.FieldError{Field: "enabled", Message: "is set by an update, not at creation"})
	}
	if len(fe) > 0 {
		return &payment.Error{Code: payment.CodeInvalidRequest, Message: "the request has invalid fields", Fields: fe}
	}
	return nil
}

// newSecret is a Standard Webhooks secret: whsec_ and base64 of 32 random
// bytes.
func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// Create registers an endpoint. A retry with the same key and body
// replays the creation (secret included); another body is refused.
func (s *Service) Create(ctx context.Context, accountID, key string, r EndpointRequest) (*Endpoint, bool, error) {
	fp, err := idempotency.Fingerprint("webhook_endpoint.create", r)
	if err != nil {
		return nil, false, err
	}
	if err := s.check(ctx, r, true); err != nil {
		return nil, false, err
	}
	secret := newSecret()
	now := s.now().UTC().Truncate(time.Microsecond)
	events := slices.Clone(*r.EnabledEvents)
	slices.Sort(events)
	e := &Endpoint{ID: payment.NewID("we"), AccountID: accountID, URL: *r.URL, EnabledEvents: slices.Compact(events),
		Status: StatusEnabled, SecretEnc: s.seal.Seal(secret),
		CreateKeyHash: idempotency.HashKey(key), CreateFingerprint: fp, CreatedAt: now, UpdatedAt: now}
	if r.Description != nil {
		e.Description = *r.Description
	}
	got, created, err := s.store.EndpointInsert(ctx, e, MaxEndpoints)
	if err != nil {
		return nil, false, err
	}
	if !created && string(got.CreateFingerprint) != string(fp) {
		return nil, false, payment.Errorf(payment.CodeIdempotencyKeyReused, "this Idempotency-Key was used with a different request")
	}
	if got.Secret, err = s.seal.Open(got.SecretEnc); err != nil {
		return nil, false, err
	}
	// A second endpoint with one URL is allowed (as Stripe), but it signs
	// with its own secret: the answer names the others, so a merchant who
	// meant to replace one can delete it.
	if got.SameURL, err = s.store.WebhookEndpointIDsByURL(ctx, accountID, got.URL, got.ID); err != nil {
		return nil, false, err
	}
	if got.SameURL == nil {
		got.SameURL = []string{}
	}
	return got, !created, nil
}

// Get reads one of the account's endpoints.
func (s *Service) Get(ctx context.Context, accountID, id string) (*Endpoint, error) {
	return s.store.WebhookEndpointGet(ctx, accountID, id)
}

// List pages the account's endpoints by id.
func (s *Service) List(ctx context.Context, accountID, after string, limit int) ([]*Endpoint, error) {
	return s.store.WebhookEndpointList(ctx, accountID, after, limit)
}

// Update changes url, enabled_events, description or enabled.
func (s *Service) Update(ctx context.Context, accountID, id string, r EndpointRequest) (*Endpoint, error) {
	if err := s.check(ctx, r, false); err != nil {
		return nil, err
	}
	e, err := s.store.WebhookEndpointGet(ctx, accountID, id)
	if err != nil {
		return nil, err
	}
	if r.URL != nil {
		e.URL = *r.URL
	}
	if r.EnabledEvents != nil {
		events := slices.Clone(*r.EnabledEvents)
		slices.Sort(events)
		e.EnabledEvents = slices.Compact(events)
	}
	if r.Description != nil {
		e.Description = *r.Description
	}
	if r.Enabled != nil {
		e.Status = StatusDisabled
		if *r.Enabled {
			e.Status = StatusEnabled
		}
	}
	return s.store.WebhookEndpointUpdate(ctx, e, s.now().UTC())
}

// Delete removes an endpoint: nothing more is delivered to it.
func (s *Service) Delete(ctx context.Context, accountID, id string) error {
	return s.store.WebhookEndpointDelete(ctx, accountID, id, s.now().UTC())
}

// RotateSecret makes a new signing secret; the old one keeps signing
// beside it for RotationOverlap. A retry with the key of the last rotation
// shows the same secret again instead of rotating twice.
func (s *Service) RotateSecret(ctx context.Context, accountID, id, key string) (*Endpoint, error) {
	e, err := s.store.WebhookEndpointGet(ctx, accountID, id)
	if err != nil {
		return nil, err
	}
	h := idempotency.HashKey(key)
	if string(e.RotateKeyHash) != string(h) {
		now := s.now().UTC()
		if e, err = s.store.WebhookEndpointRotate(ctx, accountID, id, s.seal.Seal(newSecret()), h, now.Add(RotationOverlap), now); err != nil {
			return nil, err
		}
	}
	if e.Secret, err = s.seal.Open(e.SecretEnc); err != nil {
		return nil, err
	}
	return e, nil
}

// Deliveries lists the attempts to one endpoint.
func (s *Service) Deliveries(ctx context.Context, accountID, endpointID string, after int64, limit int) ([]Attempt, error) {
	if _, err := s.store.WebhookEndpointGet(ctx, accountID, endpointID); err != nil {
		return nil, err
	}
	return s.store.WebhookAttemptsByEndpoint(ctx, accountID, endpointID, after, limit)
}

// EventDeliveries lists the attempts of one event.
func (s *Service) EventDeliveries(ctx context.Context, accountID, eventID string, after int64, limit int) ([]Attempt, error) {
	return s.store.WebhookAttemptsByEvent(ctx, accountID, eventID, after, limit)
}

// Redeliver sends an event again to every enabled endpoint that takes it.
func (s *Service) Redeliver(ctx context.Context, accountID, eventID string) error {
	if !strings.HasPrefix(eventID, "evt_") {
		return payment.ErrNotFound
	}
	return s.store.Redeliver(ctx, accountID, eventID)
}

// AdminList pages every account's endpoints by id, or one account's.
func (s *Service) AdminList(ctx context.Context, accountID, after string, limit int) ([]*Endpoint, error) {
	if accountID != "" {
		return s.store.WebhookEndpointList(ctx, accountID, after, limit)
	}
	return s.store.WebhookEndpointListAll(ctx, after, limit)
}

// AdminDeliveries lists the attempts to any account's endpoint, deleted
// ones included.
func (s *Service) AdminDeliveries(ctx context.Context, endpointID string, after int64, limit int) ([]Attempt, error) {
	e, err := s.store.WebhookEndpointGetAny(ctx, endpointID)
	if err != nil {
		return nil, err
	}
	return s.store.WebhookAttemptsByEndpoint(ctx, e.AccountID, endpointID, after, limit)
}

// AdminEventDeliveries lists the attempts of any account's event.
func (s *Service) AdminEventDeliveries(ctx context.Context, eventID string, after int64, limit int) ([]Attempt, error) {
	accountID, err := s.store.EventAccount(ctx, eventID)
	if err != nil {
		return nil, err
	}
	return s.store.WebhookAttemptsByEvent(ctx, accountID, eventID, after, limit)
}

// AdminRedeliver sends any account's event again to every enabled endpoint
// that takes it, audited with actor and reason; it returns the event's
// account.
func (s *Service) AdminRedeliver(ctx context.Context, eventID, actor, reason string) (string, error) {
	if !strings.HasPrefix(eventID, "evt_") {
		return "", payment.ErrNotFound
	}
	return s.store.RedeliverAudited(ctx, eventID, DeliveryAuditEntry{At: s.now().UTC(), Actor: actor, Action: "event.redeliver", Reason: reason})
}

// Matches reports whether an endpoint's enabled_events take a type.
func Matches(enabled []string, eventType string) bool {
	return slices.Contains(enabled, "*") || slices.Contains(enabled, eventType)
}
