package stripe

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/acmepay/payments/internal/provider"
	"github.com/acmepay/payments/internal/provider/providertest"
)

// TestTransport: what a call's transport did decides whether Stripe was
// reached (CONTRACT §15).
func TestTransport(t *testing.T) {
	t.Parallel()
	providertest.RunTransport(t, func(_ *testing.T, base string, client *http.Client) provider.Provider {
		return New(Config{APIBase: base, HTTPClient: client})
	})
}

// TestRetriesThatNeverConnectedAreUnreachable: stripe-go re-sends a call
// whose dial was refused; when every try was refused, none wrote a byte.
func TestRetriesThatNeverConnectedAreUnreachable(t *testing.T) {
	t.Parallel()
	tries := &countTries{}
	p := New(Config{APIBase: providertest.ClosedURL(t), MaxNetworkRetries: 1, HTTPClient: tries.client()})
	res := p.Refund(context.Background(), creds, provider.RefundRequest{IdempotencyKey: "k", IntentID: "pi_1"})
	if res.Answer != provider.AnswerUnreachable || res.FailureCode != codeUnreachable || res.Resent {
		t.Fatalf("got %q code %q resent %v (err %v), want unreachable, not re-sent", res.Answer, res.FailureCode, res.Resent, res.Err)
	}
	if n := tries.n.Load(); n != 2 {
		t.Fatalf("%d tries, want stripe-go's retry after the first", n)
	}
}

// TestRetryRefusedAfterAWrittenTryIsNotUnreachable: the first try wrote its
// request and lost the connection, stripe-go's retry was refused. The first
// try may have charged, so the call is in doubt, whatever the last error.
func TestRetryRefusedAfterAWrittenTryIsNotUnreachable(t *testing.T) {
	t.Parallel()
	tries := &countTries{}
	p := New(Config{APIBase: providertest.OnceThenRefused(t), MaxNetworkRetries: 1, HTTPClient: tries.client()})
	res := p.Authorize(context.Background(), creds, authReq())
	if res.Answer != provider.AnswerIndeterminate || res.FailureCode == codeUnreachable {
		t.Fatalf("got %q code %q (err %v), want indeterminate", res.Answer, res.FailureCode, res.Err)
	}
	if n := tries.n.Load(); n != 2 || !errors.Is(res.Err, syscall.ECONNREFUSED) {
		t.Fatalf("%d tries ending with %v, want a second try that was refused", n, res.Err)
	}
	if got := provider.Judge(p.Profile(), res.Answer, provider.Send{Authorize: true, Recovery: res.Resent}); got != provider.Unknown {
		t.Fatalf("judged %s, want unknown", got)
	}
}

// countTries counts the requests stripe-go hands to a real transport.
type countTries struct{ n atomic.Int32 }

func (c *countTries) client() *http.Client {
	return &http.Client{Transport: c}
}

func (c *countTries) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}
