package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
)

func TestLoadConfigHTTPLimits(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPReadTimeout != 15*time.Second || c.HTTPWriteTimeout != 60*time.Second ||
		c.HTTPIdleTimeout != 120*time.Second || c.HTTPMaxHeaderBytes != 64<<10 {
		t.Fatalf("defaults = %v, %v, %v, %d; want 15s, 60s, 120s, 65536",
			c.HTTPReadTimeout, c.HTTPWriteTimeout, c.HTTPIdleTimeout, c.HTTPMaxHeaderBytes)
	}
	c, err = loadConfig(env("HTTP_READ_TIMEOUT", "2s", "HTTP_WRITE_TIMEOUT", "25s", "HTTP_IDLE_TIMEOUT", "1m", "HTTP_MAX_HEADER_BYTES", "8192"))
	if err != nil || c.HTTPReadTimeout != 2*time.Second || c.HTTPWriteTimeout != 25*time.Second ||
		c.HTTPIdleTimeout != time.Minute || c.HTTPMaxHeaderBytes != 8192 {
		t.Fatalf("set: %+v, %v", c, err)
	}
	for _, bad := range [][]string{
		{"HTTP_READ_TIMEOUT", "0s"}, {"HTTP_IDLE_TIMEOUT", "forever"}, {"HTTP_MAX_HEADER_BYTES", "64k"},
		{"HTTP_MAX_HEADER_BYTES", "10"},
		// Not longer than the provider call plus the database work around it.
		{"HTTP_WRITE_TIMEOUT", "10s"}, {"HTTP_WRITE_TIMEOUT", "15s"},
		{"HTTP_WRITE_TIMEOUT", "30s", "PROVIDER_TIMEOUT", "25s"}, {"HTTP_WRITE_TIMEOUT", "30s", "DB_STATEMENT_TIMEOUT", "25s"},
	} {
		_, err := loadConfig(env(bad...))
		if err == nil || !strings.Contains(err.Error(), bad[0]) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: err %v, want one line naming %s", bad, err, bad[0])
		}
	}
}

// serveTest runs newHTTPServer on a loopback port with a handler that reads
// the whole body, as the API's handlers do.
func serveTest(t *testing.T, cfg config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := newHTTPServer(cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, "body", http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

func testHTTPConfig(t *testing.T, kv ...string) config {
	t.Helper()
	cfg, err := loadConfig(env(kv...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// closed reports, on the channel it returns, when the server closes conn:
// it reads until EOF or an error.
func closed(conn net.Conn) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, conn)
	}()
	return done
}

// waitBound is how long a test waits for the server to close a
// connection: far above the settings used, so a slow machine never fails
// a correct server, while a server with no limit never closes it.
const waitBound = 20 * time.Second

func TestHTTPServerCutsSlowBody(t *testing.T) {
	t.Parallel()
	addr := serveTest(t, testHTTPConfig(t, "HTTP_READ_TIMEOUT", "300ms"))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprint(conn, "POST /v1/payments HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	done := closed(conn)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	bound := time.After(waitBound)
	for sent := 0; ; sent++ {
		select {
		case <-done:
			return
		case <-bound:
			t.Fatalf("a body sent one byte every 20ms (%d bytes so far) still holds its connection", sent)
		case <-tick.C:
			// A write error means the server has closed: done follows.
			_, _ = conn.Write([]byte("{"))
		}
	}
}

func TestHTTPServerClosesIdleKeepAlive(t *testing.T) {
	t.Parallel()
	addr := serveTest(t, testHTTPConfig(t, "HTTP_IDLE_TIMEOUT", "200ms"))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	// Two requests on one connection: it is kept alive between them, and
	// closed once idle.
	for range 2 {
		if _, err := fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("status %d, close %v: want a kept-alive 200", resp.StatusCode, resp.Close)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := br.ReadByte()
		done <- err
	}()
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("idle connection: read %v, want EOF from the server closing it", err)
		}
	case <-time.After(waitBound):
		t.Fatal("an idle keep-alive connection is still open")
	}
}

func TestHTTPServerLimitsHeaderSize(t *testing.T) {
	t.Parallel()
	addr := serveTest(t, testHTTPConfig(t, "HTTP_MAX_HEADER_BYTES", "8192"))
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("a", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("64 KiB of headers over an 8 KiB limit: %d, want 431", resp.StatusCode)
	}
	// Under the limit it is served.
	req.Header.Set("X-Padding", "a")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("small headers: %d", resp.StatusCode)
	}
}

// The real `payments serve` applies the settings: an idle keep-alive
// connection and a body trickling in are both closed.
func TestServeBoundsConnections(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	p := start(t, e, buildBinary(t, ""), "HTTP_IDLE_TIMEOUT=200ms", "HTTP_READ_TIMEOUT=500ms")
	addr := strings.TrimPrefix(p.url, "http://")

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := fmt.Fprint(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	idleClosed := closed(idle) // reads the answer, then waits for EOF

	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := fmt.Fprintf(slow, "POST /v1/payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: k-slow\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n", e.APIKey); err != nil {
		t.Fatal(err)
	}
	slowClosed := closed(slow)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	bound := time.After(waitBound)
	for idleClosed != nil || slowClosed != nil {
		select {
		case <-idleClosed:
			idleClosed = nil
		case <-slowClosed:
			slowClosed = nil
		case <-tick.C:
			if slowClosed != nil {
				_, _ = slow.Write([]byte(" "))
			}
		case <-bound:
			t.Fatalf("still open after %s: idle %v, slow body %v", waitBound, idleClosed != nil, slowClosed != nil)
		}
	}
}

// TestRequestsEndBeforeTheWriteTimeout: a handler's context ends before the
// write timeout, so a database round trip the network stalls (which the
// server's statement_timeout cannot end) fails in time for a 503.
func TestRequestsEndBeforeTheWriteTimeout(t *testing.T) {
	t.Parallel()
	const write = 5 * time.Second
	var deadline time.Time
	var ok bool
	before := time.Now()
	boundRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deadline, ok = r.Context().Deadline()
	}), write).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	if !ok || !deadline.Before(before.Add(write)) {
		t.Fatalf("request deadline %v (set %v), want one before the write timeout ends at %v", deadline, ok, before.Add(write))
	}
}
