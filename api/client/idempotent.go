package client

// This file is written by hand; oapi-codegen writes client.gen.go only.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// KeyStore keeps the Idempotency-Key of each payment intent, so that every
// retry of the intent, also after a crash of the caller, sends the key of
// the first try. A store that outlives the process (a column beside the
// order, written before the request leaves) is what makes a retry after a
// restart safe; MemoryKeyStore only covers retries within one process.
type KeyStore interface {
	// LoadOrStore returns the key already stored for intent or, when there
	// is none, stores key and returns it. It must be atomic: two callers
	// racing on one intent both get the key that was stored first.
	LoadOrStore(ctx context.Context, intent, key string) (string, error)
}

// MemoryKeyStore is a KeyStore in memory, the default.
type MemoryKeyStore struct {
	mu   sync.Mutex
	keys map[string]string
}

// LoadOrStore implements KeyStore.
func (m *MemoryKeyStore) LoadOrStore(_ context.Context, intent, key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k, ok := m.keys[intent]; ok {
		return k, nil
	}
	if m.keys == nil {
		m.keys = map[string]string{}
	}
	m.keys[intent] = key
	return key, nil
}

// ErrNotFinal is returned with the last answer when the attempts ran out
// while the payment's outcome was still unknown (202) or its key still in
// use (409): the payment may yet be charged. Keep the intent's key and call
// Create again later, or read the payment by its id.
var ErrNotFinal = errors.New("payment outcome not final yet; retry later with the same intent")

// Creator creates payments with the caller's half of the idempotency
// contract: one unpredictable key per intent, stored before the first
// send, and reused on every retry, never a new one.
type Creator struct {
	// Client is the generated client, with the API key set by a request
	// editor.
	Client *ClientWithResponses
	// Keys stores each intent's key; nil is an in-memory store.
	Keys KeyStore
	// MaxAttempts bounds the sends of one Create (default 6).
	MaxAttempts int
	// BaseDelay and MaxDelay bound the exponential backoff with full
	// jitter (defaults 500ms and 30s); a longer Retry-After wins.
	BaseDelay, MaxDelay time.Duration

	// sleep, when set, replaces the timer between attempts (tests).
	sleep   func(ctx context.Context, d time.Duration) error
	mu      sync.Mutex
	memKeys *MemoryKeyStore
}

// NewKey makes an Idempotency-Key: 32 bytes from crypto/rand, base64url.
func NewKey() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Create sends body as the payment of intent (a name for this checkout's
// try, such as the order id) and retries, with the intent's key, on
// network errors, 202 (outcome unknown), 409 idempotency_key_in_use and
// 5xx, until a final answer, MaxAttempts or ctx. A final answer (201,
// 200, or a 4xx other than those) is returned with a nil error; check its
// StatusCode. After declined, failed or canceled, a new try of the order
// is a new intent ("pedido-842/2"): the same intent would replay the old
// answer.
func (c *Creator) Create(ctx context.Context, intent string, body CreatePaymentJSONRequestBody) (*CreatePaymentResponse, error) {
	key, err := c.keys().LoadOrStore(ctx, intent, NewKey())
	if err != nil {
		return nil, fmt.Errorf("store the idempotency key of %q: %w", intent, err)
	}
	params := &CreatePaymentParams{IdempotencyKey: key}
	var last *CreatePaymentResponse
	var lastErr error
	for attempt := 0; attempt < c.maxAttempts(); attempt++ {
		if attempt > 0 {
			if err := c.wait(ctx, attempt, last); err != nil {
				return last, errors.Join(err, lastErr)
			}
		}
		last, lastErr = c.Client.CreatePaymentWithResponse(ctx, params, body)
		if lastErr == nil && !retriable(last) {
			return last, nil
		}
		if ctx.Err() != nil {
			return last, errors.Join(ctx.Err(), lastErr)
		}
	}
	if lastErr != nil {
		return last, fmt.Errorf("create payment: %d attempts: %w", c.maxAttempts(), lastErr)
	}
	return last, ErrNotFinal
}

// retriable tells the answers that a retry with the same key may change.
func retriable(r *CreatePaymentResponse) bool {
	switch code := r.StatusCode(); {
	case code == http.StatusAccepted, code == http.StatusTooManyRequests, code >= 500:
		return true
	case code == http.StatusConflict:
		return r.ApplicationproblemJSON409 != nil && r.ApplicationproblemJSON409.Code == "idempotency_key_in_use"
	}
	return false
}

// wait sleeps before retry number attempt: full jitter over an exponential
// ceiling, but never less than the last answer's Retry-After.
func (c *Creator) wait(ctx context.Context, attempt int, last *CreatePaymentResponse) error {
	base, ceiling := c.BaseDelay, c.MaxDelay
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	if ceiling <= 0 {
		ceiling = 30 * time.Second
	}
	limit := ceiling
	if shift := attempt - 1; shift < 30 && base<<shift < ceiling {
		limit = base << shift
	}
	d := mrand.N(limit + 1)
	if last != nil && last.HTTPResponse != nil {
		if ra := retryAfter(last.HTTPResponse.Header.Get("Retry-After")); ra > d {
			d = ra
		}
	}
	if c.sleep != nil {
		return c.sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryAfter reads Retry-After in seconds or as an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

func (c *Creator) keys() KeyStore {
	if c.Keys != nil {
		return c.Keys
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.memKeys == nil {
		c.memKeys = &MemoryKeyStore{}
	}
	return c.memKeys
}

func (c *Creator) maxAttempts() int {
	if c.MaxAttempts > 0 {
		return c.MaxAttempts
	}
	return 6
}
