package chaos

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Bounds of one revocation of the account's secret key: long enough that
// first sends fail and recoveries meet it, short enough that the run goes
// on.
const (
	minRevoked = time.Second
	maxRevoked = 4 * time.Second
)

// rotation plays a credential rotation gone wrong: at random moments the
// account's Stripe secret key or Mercado Pago access token, or both, are
// revoked at their providers for a few seconds, then restored. The provider checks credentials before it looks at the
// Idempotency-Key, so a first send answered 401 had no effect and fails
// its payment, while a re-send answered 401 proves nothing and must stay
// unknown until the key works again.
type rotation struct {
	simURL string
	keys   []string // Stripe's secret key, Mercado Pago's access token
	http   *http.Client

	mu          sync.Mutex
	revocations int
	revoked     time.Duration
}

func newRotation(simURL string, keys ...string) *rotation {
	return &rotation{simURL: simURL, keys: keys, http: &http.Client{Timeout: 30 * time.Second}}
}

// run revokes the key at random moments, a mean of every apart, until ctx
// is done. The key is always restored before it returns, even when ctx
// ends during a revocation: reconciliation after the run needs it.
func (c *rotation) run(ctx context.Context, every time.Duration, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0xc0de))
	for {
		sleep(ctx, every/2+time.Duration(rng.Int64N(int64(every))))
		if ctx.Err() != nil {
			return nil
		}
		hold := minRevoked + time.Duration(rng.Int64N(int64(maxRevoked-minRevoked)))
		// Both keys half the time, else one alone: while only Mercado
		// Pago's is revoked, a create naming a card at both providers
		// fails over to Stripe.
		keys := c.keys
		if n := rng.IntN(2 * len(c.keys)); n < len(c.keys) {
			keys = c.keys[n : n+1]
		}
		start := time.Now()
		if err := c.revoke(ctx, keys); err != nil {
			// The revocation may have landed before the error.
			rerr := c.restore()
			if ctx.Err() != nil {
				return rerr
			}
			return err
		}
		sleep(ctx, hold)
		if err := c.restore(); err != nil {
			return err
		}
		c.mu.Lock()
		c.revocations++
		c.revoked += time.Since(start)
		c.mu.Unlock()
	}
}

func (c *rotation) revoke(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := simControl(ctx, c.http, http.MethodPost, c.simURL+"/_sim/secrets/revoke", map[string]string{"secret_key": k}); err != nil {
			return err
		}
	}
	return nil
}

func (c *rotation) restore() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, k := range c.keys {
		if err := simControl(ctx, c.http, http.MethodPost, c.simURL+"/_sim/secrets/restore", map[string]string{"secret_key": k}); err != nil {
			return err
		}
	}
	return nil
}

func (c *rotation) snapshot() (int, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.revocations, c.revoked
}
