package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// buildBinaries compiles the service's commands into dir, from the module
// that holds this one.
func buildBinaries(ctx context.Context, dir string) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return errors.New("run paybench from inside the payments module (go run ./cmd/paybench)")
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(os.PathSeparator), "./cmd/payments", "./cmd/providersim")
	cmd.Dir = filepath.Dir(gomod)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	return nil
}

// proc is a child process whose resources are measured.
type proc struct {
	name string
	cmd  *exec.Cmd
	logs *tailBuffer
	done chan struct{}
}

// start runs a command. A process that announces its address prints a
// line containing "http://ADDR"; start waits for it and returns that base
// URL ("" when none came).
func start(name string, env []string, announces bool, args ...string) (*proc, string, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{name: name, cmd: cmd, logs: &tailBuffer{max: 16 << 10}, done: make(chan struct{})}
	cmd.Stderr = p.logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()

	base := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if i := strings.Index(sc.Text(), "http://"); i >= 0 && !sent {
				base <- strings.Fields(sc.Text()[i:])[0]
				sent = true
			}
		}
	}()
	if !announces {
		return p, "", nil
	}
	return p, waitBase(p, base), nil
}

func waitBase(p *proc, base chan string) string {
	select {
	case b := <-base:
		return b
	case <-p.done:
		return ""
	case <-time.After(15 * time.Second):
		return ""
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop asks the process to drain (SIGTERM) and kills it after a grace
// period.
func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// failed describes a process that exited early, with the tail of its logs.
func (p *proc) failed() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.cmd.ProcessState, p.logs.String())
	default:
		return nil
	}
}

// resetPeakRSS restarts the VmHWM high-water mark, so each step reports
// its own peak (Linux clear_refs, value 5).
func (p *proc) resetPeakRSS() bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.pid()), []byte("5"), 0) == nil
}

// peakRSS is VmHWM in bytes.
func (p *proc) peakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max { // trimmed now and then, not on every write
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b[max(0, len(t.b)-t.max):])
}

// freeAddr picks a loopback port for a process that cannot report the one
// it bound.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitHealthy polls url until it answers 200.
func waitHealthy(ctx context.Context, p *proc, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := p.failed(); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: %s did not answer 200 within 30s\n%s", p.name, url, p.logs.String())
}

// createAccount runs `payments accounts create` and returns the id and API
// key it prints.
func createAccount(ctx context.Context, bin string, env []string) (id, apiKey string, err error) {
	return createAccountWithKey(ctx, bin, env, "sk_test_paybench_"+randomHex(8))
}

// createAccountWithKey is createAccount with the account's simulator secret
// key, by which the simulator counts that account's calls.
func createAccountWithKey(ctx context.Context, bin string, env []string, stripeKey string) (id, apiKey string, err error) {
	cmd := exec.CommandContext(ctx, bin, "accounts", "create", "--name", "paybench",
		"--stripe-key", stripeKey)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("payments accounts create: %w\n%s", err, stderr.String())
	}
	var a struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	if err := json.Unmarshal(out, &a); err != nil {
		return "", "", fmt.Errorf("payments accounts create printed %q: %w", out, err)
	}
	return a.ID, a.APIKey, nil
}

// simAuthorizations reads the simulator's count of intents authorized.
func simAuthorizations(ctx context.Context, base string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/_sim/stats", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var s struct {
		Authorizations int `json:"authorizations"`
	}
	return s.Authorizations, json.NewDecoder(resp.Body).Decode(&s)
}

// startPerf records every CPU (perf record -a -g) into dir/name.data until
// the returned function is called; that function returns a note for the
// step. perf missing or refused is a note, not a failure.
func startPerf(dir, name string, pid int) func() string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return func() string { return "perf: " + err.Error() }
	}
	out := filepath.Join(dir, name+".data")
	cmd := exec.Command("perf", "record", "-a", "-g", "-F", "499", "-o", out)
	logs := &tailBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return func() string { return "perf: " + err.Error() }
	}
	return func() string {
		_ = cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == -1) { // -1: ended by the interrupt
			return fmt.Sprintf("perf: %v %s", err, strings.TrimSpace(logs.String()))
		}
		return fmt.Sprintf("profiled: %s (perf report -i %[1]s --pid %d)", out, pid)
	}
}

// serverTimes are the service's own latency sums, from its /metrics.
type serverTimes struct {
	requestSum, requestCount   float64 // POST /v1/payments, inside the service
	providerSum, providerCount float64 // provider calls
}

// scrapeServerTimes reads the service's histograms; zero when unavailable.
func scrapeServerTimes(base string) serverTimes {
	var t serverTimes
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return t
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		payments := strings.Contains(labels, `route="/v1/payments"`)
		switch {
		case name == "payments_http_request_duration_seconds_sum" && payments:
			t.requestSum += v
		case name == "payments_http_request_duration_seconds_count" && payments:
			t.requestCount += v
		case name == "payments_provider_call_duration_seconds_sum":
			t.providerSum += v
		case name == "payments_provider_call_duration_seconds_count":
			t.providerCount += v
		}
	}
	return t
}

// means describes the service's mean time per request and per provider
// call between two scrapes.
func (t serverTimes) means(before serverTimes) string {
	n := t.requestCount - before.requestCount
	if n <= 0 {
		return ""
	}
	s := fmt.Sprintf("in service %.2f ms", 1000*(t.requestSum-before.requestSum)/n)
	if p := t.providerCount - before.providerCount; p > 0 {
		s += fmt.Sprintf(", provider call %.2f ms", 1000*(t.providerSum-before.providerSum)/p)
	}
	return s + " (means)"
}
