package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/notify"
)

// acceptCounter is a TCP listener on loopback that hears of every
// connection made to it, by the peer's address.
type acceptCounter struct {
	ln   net.Listener
	seen chan string
}

func newAcceptCounter(t *testing.T, network, addr string) *acceptCounter {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("listen %s: %v", addr, err)
	}
	c := &acceptCounter{ln: ln, seen: make(chan string, 100)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.seen <- conn.RemoteAddr().String()
			conn.Close()
		}
	}()
	return c
}

// connectionsBefore is how many connections were made before this call:
// it dials the listener itself and counts what is accepted before it.
func (c *acceptCounter) connectionsBefore(t *testing.T) int {
	t.Helper()
	conn, err := net.Dial(c.ln.Addr().Network(), c.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sentinel := conn.LocalAddr().String()
	conn.Close()
	deadline := time.After(apitest.WaitTimeout)
	for n := 0; ; n++ {
		select {
		case peer := <-c.seen:
			if peer == sentinel {
				return n
			}
		case <-deadline:
			t.Fatal("the listener never accepted the sentinel connection")
		}
	}
}

// problemWithoutRequestID is an error answer with its request id blanked,
// to compare two answers.
func problemWithoutRequestID(t *testing.T, r *apitest.Response) string {
	t.Helper()
	m := r.JSON(t)
	delete(m, "request_id")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(r.Status, " ", string(b))
}

func TestWebhookAddressPolicy(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, apitest.Options{})
	lc := newAcceptCounter(t, "tcp6", "[::1]:0")
	port := lc.ln.Addr().(*net.TCPAddr).Port

	create := func(key, u string) *apitest.Response {
		return e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/webhook_endpoints", Key: key,
			Body: fmt.Sprintf(`{"url":%q,"enabled_events":["*"]}`, u)})
	}
	zoned := fmt.Sprintf("https://[::1%%25lo]:%d/h", port)
	var answers []string
	for i, u := range []string{zoned, "https://[fe80::1%25eth0]/h", "https://[::7f00:1]/h",
		"https://[2002:7f00:1::]/h", "https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/h",
		"https://[64:ff9b::7f00:1]/h", "https://[64:ff9b:1:7f00:0:100::]/h", "https://[::ffff:a9fe:a9fe]/h",
		"https://localhost/h", "https://no-such-name.invalid/h"} {
		r := create(fmt.Sprint("k-addr-", i), u)
		if r.Status != http.StatusBadRequest || r.Code(t) != "invalid_request" {
			t.Errorf("%s: %d %s, want 400 invalid_request", u, r.Status, r.Body)
			continue
		}
		answers = append(answers, problemWithoutRequestID(t, r))
	}
	// A name that does not resolve and one that resolves to a refused
	// address get the same answer, as do refused literals.
	for _, a := range answers[1:] {
		if a != answers[0] {
			t.Errorf("answers differ:\n%s\n%s", answers[0], a)
		}
	}

	// The dialer refuses the zoned loopback too.
	_, err := notify.Guard{}.Client(time.Second).Post(zoned, "application/json", strings.NewReader("{}"))
	if !errors.Is(err, notify.ErrAddressRefused) {
		t.Errorf("post to %s: %v, want ErrAddressRefused", zoned, err)
	}

	// An endpoint whose URL became the zoned loopback after its creation
	// is refused at delivery.
	ep := createEndpoint(t, e, "k-public", "https://93.184.216.34/h", "*")
	if _, err := e.DB.Pool.Exec(context.Background(), `UPDATE webhook_endpoints SET url = $1 WHERE id = $2`, zoned, ep["id"]); err != nil {
		t.Fatal(err)
	}
	if r := e.Create("k-pay", apitest.CreateBody("pedido-zone", 2000)); r.Status != http.StatusCreated {
		t.Fatalf("create payment: %d %s", r.Status, r.Body)
	}
	jobs := webhookJobsFor(t, e, ep["id"].(string))
	if len(jobs) == 0 {
		t.Fatal("no delivery job: the test proves nothing")
	}
	for _, j := range jobs {
		if _, err := e.WorkWebhookJob(t, j); err == nil {
			t.Errorf("a delivery to %s went through", zoned)
		}
	}
	if n := lc.connectionsBefore(t); n != 0 {
		t.Fatalf("the loopback listener got %d connections, want 0", n)
	}
}
