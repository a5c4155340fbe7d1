package main

import (
	"bytes"
	"encoding/base64"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// binaries builds the real binary once per build tag set.
var binaries sync.Map

func buildBinary(t *testing.T, tags string) string {
	t.Helper()
	type result struct {
		path string
		err  error
		out  []byte
	}
	v, _ := binaries.LoadOrStore(tags, sync.OnceValue(func() result {
		dir, err := os.MkdirTemp("", "payments-bin-")
		if err != nil {
			return result{err: err}
		}
		path := filepath.Join(dir, "payments")
		args := []string{"build", "-o", path}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		return result{path: path, err: err, out: out}
	}))
	r := v.(func() result)()
	if r.err != nil {
		t.Fatalf("build: %v\n%s", r.err, r.out)
	}
	return r.path
}

// proc is a running `payments serve`.
type proc struct {
	cmd    *exec.Cmd
	url    string
	stderr *apitest.SyncBuffer
	done   chan error
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func start(t *testing.T, e *apitest.Env, bin string, extraEnv ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+e.DBURL, "HTTP_ADDR="+addr, "STRIPE_API_BASE="+e.SimURL,
		"ENCRYPTION_KEY="+base64.StdEncoding.EncodeToString(apitest.EncryptionKey),
		"PROVIDER_TIMEOUT=1s", "IN_PROGRESS_LEASE=2s", "ADMIN_TOKEN="+apitest.AdminToken)
	cmd.Env = append(cmd.Env, extraEnv...)
	p := &proc{cmd: cmd, url: "http://" + addr, stderr: &apitest.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("payments stderr:\n%s", p.stderr.String())
		}
	})
	// Wait for the listener; the binary migrates first.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			return p
		}
		select {
		case err := <-p.done:
			p.done <- err // for the cleanup's wait
			t.Fatalf("payments exited before listening: %v\n%s", err, p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("payments did not start:\n%s", p.stderr.String())
		}
	}
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	apitest.Recv(t, p.done, "the killed payments process to exit")
	p.done <- nil // let the cleanup's wait return
}

const crashBody = `{"order_id":"pedido-crash","amount":2000,"currency":"BRL","payment_method":"pm_card_visa","capture_method":"manual"}`

// crashPixBody is a Pix create: the answer carries a QR code, which must be
// the one the provider made for the first send, however often it is asked.
const crashPixBody = `{"order_id":"pedido-crash-pix","amount":2000,"currency":"BRL","payment_method":"pix"}`

// retryUntilFinal retries the create like a well-behaved client: honouring
// 409 in-use and 202 unknown, until the answer is final.
func retryUntilFinal(t *testing.T, e *apitest.Env, url, key string) *apitest.Response {
	t.Helper()
	return retryBodyUntilAnswered(t, e, url, key, crashBody)
}

// retryBodyUntilAnswered retries a create with body until it is neither 409
// in-use nor 202 unknown.
func retryBodyUntilAnswered(t *testing.T, e *apitest.Env, url, key, body string) *apitest.Response {
	t.Helper()
	for range 40 {
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: body, BaseURL: url})
		if r.Status != http.StatusConflict && r.Status != http.StatusAccepted {
			return r
		}
		time.Sleep(250 * time.Millisecond) // the client's back-off
	}
	t.Fatalf("no final answer after 40 retries")
	return nil
}

func assertOneCharge(t *testing.T, e *apitest.Env, r *apitest.Response) {
	t.Helper()
	if r.Status != http.StatusCreated || r.JSON(t)["status"] != "authorized" {
		t.Fatalf("final answer %d %s, want 201 authorized", r.Status, r.Body)
	}
	if n := e.Sim.Stats().Authorizations; n != 1 {
		t.Fatalf("authorizations at the provider = %d, want 1", n)
	}
	for _, req := range e.Sim.Requests() {
		if req.Op == "authorize" && req.IdempotencyKey != "pedido-crash:autorizar-v1" {
			t.Fatalf("an authorization carried %q", req.IdempotencyKey)
		}
	}
}

// killedWhileProvider sends a create whose provider call is held by kind,
// kills the server while the call is out, lets the provider finish what it
// received (as a real one would) and starts a second server.
func killedWhileProvider(t *testing.T, kind providersim.FaultKind, key, body string) (*apitest.Env, *proc) {
	t.Helper()
	e := apitest.New(t, apitest.Options{})
	bin := buildBinary(t, "")
	p := start(t, e, bin)
	hold := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: kind, Times: 1})
	errc := make(chan error, 1)
	go func() {
		_, err := e.TryDo(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: body, BaseURL: p.url})
		errc <- err
	}()
	apitest.Recv(t, hold.Reached(), "the authorization to reach the provider")
	p.kill(t)
	if err := apitest.Recv(t, errc, "the killed server's client to return"); err == nil {
		t.Fatalf("the killed server answered")
	}
	hold.Release()
	return e, start(t, e, bin)
}

// killedAfterCommit sends a create to a server that dies after committing
// its answer and before sending it, starts a second server and returns the
// retry's answer, which must be the committed one replayed.
func killedAfterCommit(t *testing.T, key, body string) (*apitest.Env, *apitest.Response) {
	t.Helper()
	e := apitest.New(t, apitest.Options{})
	bin := buildBinary(t, "failpoints")
	p := start(t, e, bin, "PAYMENTS_FAILPOINT=before-response")
	if _, err := e.TryDo(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: body, BaseURL: p.url}); err == nil {
		t.Fatalf("the failpoint did not kill the server")
	}
	apitest.Recv(t, p.done, "the failpoint to end the payments process")
	p.done <- nil
	p2 := start(t, e, bin)
	r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: key, Body: body, BaseURL: p2.url})
	if r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the committed answer was not replayed: %d %s", r.Status, r.Body)
	}
	return e, r
}

func TestCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills the real binary; skipped in -short")
	}

	for _, kind := range []providersim.FaultKind{providersim.HoldBeforeEffect, providersim.HoldAfterEffect} {
		t.Run("KilledWhileProvider"+strings.ReplaceAll(string(kind), "_", " "), func(t *testing.T) {
			t.Parallel()
			e, p2 := killedWhileProvider(t, kind, "k-crash", crashBody)
			assertOneCharge(t, e, retryUntilFinal(t, e, p2.url, "k-crash"))
		})
	}

	t.Run("KilledAfterCommitBeforeResponse", func(t *testing.T) {
		t.Parallel()
		e, r := killedAfterCommit(t, "k-crash", crashBody)
		assertOneCharge(t, e, r)
	})

	t.Run("SIGTERMDrainsInFlightRequests", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		p := start(t, e, buildBinary(t, ""))
		hold := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.HoldAfterEffect, Times: 1})
		got := e.DoAsync(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-term", Body: crashBody, BaseURL: p.url})
		apitest.Recv(t, hold.Reached(), "the authorization to take effect at the provider")
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		hold.Release()
		r := apitest.Await(t, got, "the in-flight create's answer after SIGTERM")
		assertOneCharge(t, e, r)
		if err := apitest.Recv(t, p.done, "the payments process to exit after SIGTERM"); err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		p.done <- nil
	})
}

// assertOnePixIntent checks a Pix create's final answer: 201
// requires_action with a QR code, one intent at the provider, every send
// with the one provider key, and the QR code of that intent.
func assertOnePixIntent(t *testing.T, e *apitest.Env, r *apitest.Response) {
	t.Helper()
	p := r.JSON(t)
	na, _ := p["next_action"].(map[string]any)
	qr, _ := na["pix_display_qr_code"].(map[string]any)
	if r.Status != http.StatusCreated || p["status"] != "requires_action" || qr["data"] == nil {
		t.Fatalf("final answer %d %s, want 201 requires_action with a QR code", r.Status, r.Body)
	}
	intents := e.Sim.Intents(e.Account.StripeSecret)
	if len(intents) != 1 {
		t.Fatalf("intents at the provider = %d, want 1", len(intents))
	}
	if p["provider_payment_id"] != intents[0].ID {
		t.Fatalf("answer names intent %v, the provider made %s", p["provider_payment_id"], intents[0].ID)
	}
	for _, req := range e.Sim.Requests() {
		if req.Op == "authorize" && req.IdempotencyKey != "pedido-crash-pix:autorizar-v1" {
			t.Fatalf("an authorization carried %q", req.IdempotencyKey)
		}
	}
}

// TestCrashPix repeats the crash tests of a card create for a Pix create:
// one intent at the provider and the same QR code in every answer.
func TestCrashPix(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills the real binary; skipped in -short")
	}

	for _, kind := range []providersim.FaultKind{providersim.HoldBeforeEffect, providersim.HoldAfterEffect} {
		t.Run("KilledWhileProvider"+strings.ReplaceAll(string(kind), "_", " "), func(t *testing.T) {
			t.Parallel()
			e, p2 := killedWhileProvider(t, kind, "k-crash-pix", crashPixBody)
			r := retryBodyUntilAnswered(t, e, p2.url, "k-crash-pix", crashPixBody)
			assertOnePixIntent(t, e, r)
			again := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-crash-pix", Body: crashPixBody, BaseURL: p2.url})
			if string(again.Body) != string(r.Body) {
				t.Fatalf("a retry answered\n%s\nafter\n%s; want the same QR code byte for byte", again.Body, r.Body)
			}
		})
	}

	t.Run("KilledAfterCommitBeforeResponse", func(t *testing.T) {
		t.Parallel()
		e, r := killedAfterCommit(t, "k-crash-pix", crashPixBody)
		assertOnePixIntent(t, e, r)
	})
}

func TestBadSettingStopsStartUp(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t, "")
	key := base64.StdEncoding.EncodeToString(apitest.EncryptionKey)
	for _, c := range []struct{ env, want string }{
		{"ENCRYPTION_KEY=", "ENCRYPTION_KEY"},
		{"ENCRYPTION_KEY=c2hvcnQ=", "ENCRYPTION_KEY"},
		{"PROVIDER_TIMEOUT=ten", "PROVIDER_TIMEOUT"},
		{"LOG_LEVEL=loud", "LOG_LEVEL"},
		{"DB_LOCK_TIMEOUT=2", "DB_LOCK_TIMEOUT"},
		{"DATABASE_URL=", "DATABASE_URL"},
		{"ENCRYPTION_KEY_PREVIOUS=c2hvcnQ=", "ENCRYPTION_KEY_PREVIOUS"},
		{"HTTP_WRITE_TIMEOUT=10s", "HTTP_WRITE_TIMEOUT"},
		{"HTTP_IDLE_TIMEOUT=0s", "HTTP_IDLE_TIMEOUT"},
		{"HTTP_MAX_HEADER_BYTES=lots", "HTTP_MAX_HEADER_BYTES"},
		{"ADMIN_TOKEN=a", "ADMIN_TOKEN"},
		{"TRUSTED_PROXY_CIDRS=10.0.0.0/99", "TRUSTED_PROXY_CIDRS"},
	} {
		cmd := exec.Command(bin, "serve")
		cmd.Env = append(os.Environ(), "DATABASE_URL=postgres://127.0.0.1:1/x", "ENCRYPTION_KEY="+key, c.env)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if err == nil || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%s: err %v, stderr %q; want one line naming %s", c.env, err, stderr.String(), c.want)
		}
	}
}
