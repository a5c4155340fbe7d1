package providertest

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// TransportAt builds an adapter on a base URL and an HTTP client (nil: the
// adapter's own).
type TransportAt func(t *testing.T, baseURL string, client *http.Client) provider.Provider

// RunTransport holds an adapter to CONTRACT §15 on real sockets: a request
// that never reached the provider (refused, unresolvable, dial timeout,
// failed TLS handshake) is unreachable and fails a first send; one written
// on a connection (then timed out or hung up on) is indeterminate.
func RunTransport(t *testing.T, at TransportAt) {
	t.Helper()
	unreachedTests(t, at)
	writtenTests(t, at)
}

// unreachedTests: calls that never had a connection to write on.
func unreachedTests(t *testing.T, at TransportAt) {
	unreached := []struct {
		name string
		base func(t *testing.T) string
		// client, when set, replaces the adapter's own.
		client func() *http.Client
	}{
		{"ConnectionRefused", func(t *testing.T) string { return ClosedURL(t) }, nil},
		{"NameNotResolved", func(*testing.T) string { return "http://api.provider.invalid" }, nil},
		{"UntrustedCertificate", func(t *testing.T) string {
			srv := httptest.NewTLSServer(http.NotFoundHandler())
			t.Cleanup(srv.Close)
			return srv.URL
		}, nil},
		{"HandshakeHungUp", func(t *testing.T) string { return "https://" + listen(t, func(c net.Conn) { _ = c.Close() }) }, nil},
		{"DialTimeout", func(t *testing.T) string { return "http://" + listen(t, func(c net.Conn) { _ = c.Close() }) },
			func() *http.Client {
				// The dial's deadline has passed before the connection is made.
				d := &net.Dialer{Timeout: time.Nanosecond}
				return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
			}},
	}
	for _, c := range unreached {
		t.Run(c.name+"IsUnreachable", func(t *testing.T) {
			t.Parallel()
			var client *http.Client
			if c.client != nil {
				client = c.client()
			}
			p := at(t, c.base(t), client)
			res := authorize(context.Background(), p)
			wantUnreachable(t, res.Answer, res.FailureCode, res.Err)
			if got := provider.Judge(p.Profile(), res.Answer, provider.Send{Authorize: true, Recovery: res.Resent}); got != provider.Failed {
				t.Fatalf("first send judged %s, want failed", got)
			}
		})
	}
	t.Run("DeadlineBeforeAnyConnectionIsUnreachable", func(t *testing.T) {
		t.Parallel()
		expired := make(chan struct{})
		close(expired)
		res := authorize(ExpireOn(expired), at(t, "http://"+listen(t, func(c net.Conn) { _ = c.Close() }), nil))
		wantUnreachable(t, res.Answer, res.FailureCode, res.Err)
	})
}

// writtenTests: calls that got a connection, or were canceled; they are in
// doubt.
func writtenTests(t *testing.T, at TransportAt) {
	t.Run("CanceledBeforeAnyConnectionIsIndeterminate", func(t *testing.T) {
		t.Parallel()
		// Nothing was written, but a cancellation says only that the
		// service stopped waiting, not that the provider is unreachable.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res := authorize(ctx, at(t, "http://"+listen(t, func(c net.Conn) { _ = c.Close() }), nil))
		if res.Answer != provider.AnswerIndeterminate || res.FailureCode == provider.FailureUnreachable {
			t.Fatalf("answer = %q code %q (err %v), want indeterminate", res.Answer, res.FailureCode, res.Err)
		}
	})
	written := []struct {
		name  string
		serve func(t *testing.T) (base string, expire <-chan struct{})
	}{
		{"DeadlineAfterTheRequestWasWritten", func(t *testing.T) (string, <-chan struct{}) {
			read := make(chan struct{})
			var once sync.Once
			return "http://" + listen(t, func(c net.Conn) {
				readRequest(c)
				once.Do(func() { close(read) })
				// Holds the connection open until the test ends.
			}), read
		}},
		{"HungUpAfterReadingTheRequest", func(t *testing.T) (string, <-chan struct{}) {
			return "http://" + listen(t, func(c net.Conn) { readRequest(c); _ = c.Close() }), nil
		}},
		// Without TLS the connection is the client's as soon as it is
		// accepted, and the request may be in the socket before the hang-up
		// is seen (with TLS the same hang-up fails the handshake: unreachable).
		{"HungUpOnAccept", func(t *testing.T) (string, <-chan struct{}) {
			return "http://" + listen(t, func(c net.Conn) { _ = c.Close() }), nil
		}},
	}
	for _, c := range written {
		t.Run(c.name+"IsIndeterminate", func(t *testing.T) {
			t.Parallel()
			base, expire := c.serve(t)
			ctx := context.Background()
			if expire != nil {
				ctx = ExpireOn(expire)
			}
			res := authorize(ctx, at(t, base, nil))
			if res.Answer != provider.AnswerIndeterminate || res.Err == nil || res.FailureCode == provider.FailureUnreachable {
				t.Fatalf("answer = %q code %q (err %v), want indeterminate with an error", res.Answer, res.FailureCode, res.Err)
			}
		})
	}
}

// authorize sends a Pix, which every adapter can build from the request.
func authorize(ctx context.Context, p provider.Provider) provider.Result {
	return p.Authorize(ctx, provider.Credentials{SecretKey: "sk_test_transport"}, provider.AuthorizeRequest{
		IdempotencyKey: "pedido-transport:autorizar-v1", Amount: amount, Currency: "BRL",
		PaymentMethod: provider.MethodPix, CaptureMethod: "automatic",
		BillingDetails: &provider.BillingDetails{Name: "Ana Souza", Email: "ana@example.com", TaxID: "52998224725"},
		Metadata:       map[string]string{"payment_id": "pay_transport", "order_id": "pedido-transport", "attempt": "1"},
	})
}

// listen serves every connection of a fresh listener with serve, on its
// own goroutine, and returns its address; connections and listener close
// when the test ends.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); serve(c) }()
		}
	}()
	return l.Addr().String()
}

// OnceThenRefused is a server that takes one connection and stops
// listening, then reads that connection's request and hangs up without an
// answer: a client that tries again finds the port refused.
func OnceThenRefused(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = l.Close(); <-done })
	go func() {
		defer close(done)
		c, err := l.Accept()
		_ = l.Close()
		if err != nil {
			return
		}
		readRequest(c)
		_ = c.Close()
	}()
	return "http://" + l.Addr().String()
}

// readRequest reads a request's line and headers, and as much of its body
// as they announce.
func readRequest(c net.Conn) {
	r := bufio.NewReader(c)
	req, err := http.ReadRequest(r)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
}

// expiring is a context whose deadline passes when a channel closes, so a
// test says when a call times out instead of waiting for a clock.
type expiring struct {
	context.Context
	at <-chan struct{}
}

// ExpireOn returns a context whose deadline passes (Err is
// DeadlineExceeded) once at is closed.
func ExpireOn(at <-chan struct{}) context.Context {
	return &expiring{Context: context.Background(), at: at}
}

func (e *expiring) Done() <-chan struct{} { return e.at }

func (e *expiring) Err() error {
	select {
	case <-e.at:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
