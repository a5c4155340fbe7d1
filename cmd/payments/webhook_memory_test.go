package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
)

// heldClients is how many clients CONTRACT §16 has post 1 MiB bodies at once.
const heldClients = 200

// rssLimit is the resident set the service must stay under meanwhile.
const rssLimit = 200 << 20

// procMemory reads a process's peak and current resident set in bytes.
func procMemory(t *testing.T, pid int) (hwm, rss int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if name == "VmHWM" {
			hwm = kb << 10
		} else {
			rss = kb << 10
		}
	}
	return hwm, rss
}

// heldPost is a webhook post whose body is sent but for its last byte.
type heldPost struct {
	conn net.Conn
	err  error // the connection failed while sending: the server refused it
}

// holdPost sends the headers and all of a 1 MiB body but its last byte.
func holdPost(addr, path string, body []byte) heldPost {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return heldPost{err: err}
	}
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Stripe-Signature: t=1,v1=00\r\nContent-Length: %d\r\n\r\n", path, len(body)); err == nil {
		_, err = conn.Write(body[:len(body)-1])
	}
	return heldPost{conn: conn, err: err}
}

// TestWebhookBodiesKeepMemoryBounded starts the real binary and has 200
// clients post 1 MiB bodies to a known account's webhook at once, each
// holding its last byte: the resident set stays under 200 MiB, and what
// the service cannot take is answered 503 with Retry-After. An unknown
// account is answered before its body is sent, and a body declared over
// the limit is 413 before it is sent.
func TestWebhookBodiesKeepMemoryBounded(t *testing.T) {
	e := apitest.New(t, apitest.Options{})
	acct, _, err := e.Accounts.Create(t.Context(), "Loja Webhook", "sk_test_"+apitest.SecretSuffix(t)+"_wh", "whsec_memory_test")
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, e, buildBinary(t, ""), "HTTP_READ_TIMEOUT=60s", "HTTP_WRITE_TIMEOUT=70s")
	pid := p.cmd.Process.Pid
	addr := strings.TrimPrefix(p.url, "http://")
	hwm0, _ := procMemory(t, pid)

	t.Run("UnknownAccountAnsweredBeforeTheBody", func(t *testing.T) {
		status, _ := postHeadersOnly(t, addr, "/webhooks/stripe/acct_00000000000000000000000000000000", 1<<20)
		if status != http.StatusBadRequest {
			t.Fatalf("unknown account = %d before the body, want 400", status)
		}
	})
	t.Run("DeclaredTooLargeAnsweredBeforeTheBody", func(t *testing.T) {
		status, _ := postHeadersOnly(t, addr, "/webhooks/stripe/"+acct.ID, 2<<20)
		if status != http.StatusRequestEntityTooLarge {
			t.Fatalf("2 MiB declared = %d before the body, want 413", status)
		}
	})

	body := bytes.Repeat([]byte("a"), 1<<20)
	posts := make([]heldPost, heldClients)
	var wg sync.WaitGroup
	for i := range posts {
		wg.Go(func() { posts[i] = holdPost(addr, "/webhooks/stripe/"+acct.ID, body) })
	}
	apitest.Wait(t, &wg, "200 clients to send their bodies")
	_, held := procMemory(t, pid)

	statuses := map[int]int{}
	for _, hp := range posts {
		if hp.conn == nil {
			continue
		}
		defer hp.conn.Close()
		status, retryAfter := finishPost(hp)
		statuses[status]++
		if status == http.StatusServiceUnavailable && retryAfter == "" {
			t.Errorf("503 without Retry-After")
		}
	}
	// VmHWM is the peak over the whole run, while the bodies were read.
	hwm, _ := procMemory(t, pid)
	t.Logf("RSS peak %d MiB (%d MiB at start, %d MiB while %d clients held 1 MiB bodies); answers %v",
		hwm>>20, hwm0>>20, held>>20, heldClients, statuses)
	if hwm > rssLimit {
		t.Fatalf("RSS peak %d MiB with %d clients posting 1 MiB, want under %d MiB", hwm>>20, heldClients, rssLimit>>20)
	}
	if statuses[http.StatusServiceUnavailable] == 0 || statuses[http.StatusBadRequest] == 0 {
		t.Fatalf("answers %v: want some bodies read (400, unsigned) and the rest refused with 503", statuses)
	}
}

// finishPost sends the last byte (when the server still listens) and reads
// the answer; 0 when there is none.
func finishPost(hp heldPost) (status int, retryAfter string) {
	if hp.err == nil {
		_, _ = hp.conn.Write([]byte("a"))
	}
	resp, err := http.ReadResponse(bufio.NewReader(hp.conn), nil)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// postHeadersOnly sends a post's headers declaring length bytes and reads
// the answer without sending any of the body.
func postHeadersOnly(t *testing.T, addr, path string, length int) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Stripe-Signature: t=1,v1=00\r\nContent-Length: %d\r\n\r\n", path, length); err != nil {
		t.Fatal(err)
	}
	return finishPost(heldPost{conn: conn, err: fmt.Errorf("no body sent")})
}
