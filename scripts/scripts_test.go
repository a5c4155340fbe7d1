// Package scripts holds the tests of the shell scripts behind make run,
// make demo, make test and make verify.
package scripts

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func bash(t *testing.T, env []string, script string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"-c", script, "bash"}, args...)...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("bash: %v", err)
	return 0, "", ""
}

// The line make run prints, pasted twice, creates two orders with two keys.
func TestRunTryLineMakesANewOrderEachPaste(t *testing.T) {
	t.Parallel()
	code, line, stderr := bash(t, os.Environ(), `source ./run.sh && try_line 127.0.0.1:8080 psk_test`)
	if code != 0 {
		t.Fatalf("try_line: exit %d: %s", code, stderr)
	}
	// Seconds and nanoseconds apart, split by a letter: one run of 19
	// digits would pass the Luhn check one paste in ten and be refused
	// as a card number.
	if !strings.Contains(line, `"order_id":"pedido-'"t$(date +%s)n$(date +%N)"'"`) {
		t.Fatalf("the order id is not a fresh shell expression:\n%s", line)
	}
	// Paste it twice, with a curl that prints what it would send.
	paste := `curl() { while [ $# -gt 0 ]; do case "$1" in -H|-d) printf '%s\n' "$2"; shift;; esac; shift; done; }
` + line + "\n" + line
	code, sent, stderr := bash(t, os.Environ(), paste)
	if code != 0 {
		t.Fatalf("pasting the line: exit %d: %s", code, stderr)
	}
	orders := regexp.MustCompile(`"order_id":"(pedido-t[0-9]{1,12}n[0-9]{1,9})"`).FindAllStringSubmatch(sent, -1)
	keys := regexp.MustCompile(`Idempotency-Key: ([0-9a-f-]{36})`).FindAllStringSubmatch(sent, -1)
	if len(orders) != 2 || len(keys) != 2 || orders[0][1] == orders[1][1] || keys[0][1] == keys[1][1] {
		t.Fatalf("two pastes sent:\n%s\nwant two different order ids and keys", sent)
	}
	if !strings.Contains(sent, "Authorization: Bearer psk_test") || !strings.Contains(sent, "Content-Type: application/json") {
		t.Fatalf("headers sent:\n%s", sent)
	}
}

// The lost-answer line make run prints holds the simulator's webhooks,
// injects a fault that drops the provider's answer, creates, removes the
// fault and creates again with the same key and body (a 202, then the same
// attempt's 201), then lets the webhooks go.
func TestRunLostAnswerRetriesWithTheSameKey(t *testing.T) {
	t.Parallel()
	code, line, stderr := bash(t, os.Environ(), `source ./run.sh && try_lost 127.0.0.1:8080 psk_test http://127.0.0.1:12111`)
	if code != 0 {
		t.Fatalf("try_lost: exit %d: %s", code, stderr)
	}
	if n := strings.Count(strings.TrimSpace(line), "\n"); n != 0 {
		t.Fatalf("want one line, got %d more:\n%s", n, line)
	}
	// A curl that prints each call on stderr (the line filters or drops
	// curl's output): method, URL, key and body.
	paste := `curl() { local m=GET u="" k="" d=""; while [ $# -gt 0 ]; do case "$1" in
  -X) m=$2; shift;; -d) d=$2; shift;; -H) case "$2" in Idempotency-Key:*) k=$2;; esac; shift;; -w|-o) shift;; -*) ;; *) u=$1;; esac; shift; done
  printf '%s %s|%s|%s\n' "$m" "$u" "$k" "$d" >&2; }
` + line
	code, _, sent := bash(t, os.Environ(), paste)
	if code != 0 {
		t.Fatalf("pasting the line: exit %d: %s", code, sent)
	}
	var calls []string
	for _, l := range strings.Split(sent, "\n") {
		if strings.HasPrefix(l, "POST ") || strings.HasPrefix(l, "DELETE ") {
			calls = append(calls, l)
		}
	}
	if len(calls) != 6 ||
		!strings.HasPrefix(calls[0], "POST http://127.0.0.1:12111/_sim/webhooks/hold|") ||
		!strings.HasPrefix(calls[1], `POST http://127.0.0.1:12111/_sim/faults||{"op":"authorize","kind":"drop_after_effect"}`) ||
		!strings.HasPrefix(calls[2], "POST http://127.0.0.1:8080/v1/payments|Idempotency-Key: ") ||
		!strings.HasPrefix(calls[3], "DELETE http://127.0.0.1:12111/_sim/faults|") ||
		calls[4] != calls[2] ||
		!strings.HasPrefix(calls[5], "POST http://127.0.0.1:12111/_sim/webhooks/release|") {
		t.Fatalf("the line sent:\n%s\nwant webhooks held, a fault, a create, the fault removed, the same create again, webhooks released",
			strings.Join(calls, "\n"))
	}
	if !regexp.MustCompile(`Idempotency-Key: [0-9a-f-]{36}\|\{"order_id":"lost-t[0-9]{1,12}n[0-9]{1,9}"`).MatchString(calls[2]) {
		t.Fatalf("create sent %s, want a fresh key and order", calls[2])
	}
}

// The Pix on Mercado Pago that make run prints, pasted twice, creates two
// Pix orders with two keys, with the payer's email Mercado Pago needs.
func TestRunMercadoPagoPixMakesANewOrderEachPaste(t *testing.T) {
	t.Parallel()
	code, out, stderr := bash(t, os.Environ(), `source ./run.sh && try_mercadopago 127.0.0.1:8080 psk_mp http://127.0.0.1:12111`)
	if code != 0 {
		t.Fatalf("try_mercadopago: exit %d: %s", code, stderr)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "curl ") || strings.HasPrefix(strings.TrimSpace(l), "-") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 5 {
		t.Fatalf("no curl line for a Pix:\n%s", out)
	}
	create := strings.Join(lines[:5], "\n")
	paste := `curl() { while [ $# -gt 0 ]; do case "$1" in -H|-d) printf '%s\n' "$2"; shift;; esac; shift; done; }
` + create + "\n" + create
	code, sent, stderr := bash(t, os.Environ(), paste)
	if code != 0 {
		t.Fatalf("pasting the line: exit %d: %s", code, stderr)
	}
	orders := regexp.MustCompile(`"order_id":"(pedido-t[0-9]{1,12}n[0-9]{1,9})"`).FindAllStringSubmatch(sent, -1)
	keys := regexp.MustCompile(`Idempotency-Key: ([0-9a-f-]{36})`).FindAllStringSubmatch(sent, -1)
	if len(orders) != 2 || len(keys) != 2 || orders[0][1] == orders[1][1] || keys[0][1] == keys[1][1] {
		t.Fatalf("two pastes sent:\n%s\nwant two different order ids and keys", sent)
	}
	if strings.Count(sent, `"payment_method":"pix"`) != 2 || strings.Count(sent, `"email":"maria@example.com"`) != 2 ||
		!strings.Contains(sent, "Authorization: Bearer psk_mp") {
		t.Fatalf("two pastes sent:\n%s\nwant a Pix with the payer's email, with the Mercado Pago account's key", sent)
	}
	if !strings.Contains(out, "http://127.0.0.1:12111/_sim/mp/payments/ID/pay") {
		t.Fatalf("no way to pay it at the simulator:\n%s", out)
	}
}

// make demo against a service that is down says so in one line, not with
// curl's own error.
func TestDemoSaysWhenTheServiceIsDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	env := append(os.Environ(), "HTTP_ADDR="+dead, "STRIPE_API_BASE=http://"+dead)
	code, stdout, stderr := bash(t, env, `exec ./demo.sh`)
	want := "demo: the service does not answer on http://" + dead + "/healthz: start it with make run"
	if code != 1 || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "curl:") || stdout != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 1 and one line starting %q", code, stdout, stderr, want)
	}
}

// scripts/test.sh fails, and says why, when stripe-mock cannot be
// installed; it never runs the tests without it unless told to on a
// developer's machine.
func TestTestShRequiresStripeMock(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("test.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		env      []string
		wantExit int
		wantGo   string // the REQUIRE_STRIPE_MOCK the tests ran with; "" when they did not run
	}{
		{"Default", nil, 1, ""},
		{"OptedOutLocally", []string{"REQUIRE_STRIPE_MOCK=0"}, 0, "0"},
		{"OptOutIgnoredInCI", []string{"REQUIRE_STRIPE_MOCK=0", "CI=true"}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A copy of the script in an empty repository, with make that
			// cannot install anything and go that records how it was run.
			root := t.TempDir()
			stubs := filepath.Join(root, "stubs")
			for dir, files := range map[string]map[string]string{
				filepath.Join(root, "scripts"): {"test.sh": string(src)},
				stubs: {
					// The TypeScript client's check (make -s ts) passes.
					"make": "#!/bin/sh\n[ \"$2\" = ts ] && exit 0\necho 'go: downloading stripe-mock: proxy unreachable' >&2\nexit 2\n",
					"go":   "#!/bin/sh\necho \"$REQUIRE_STRIPE_MOCK\" > \"$(dirname \"$0\")/go-ran\"\n",
					// Present, so the run installs no browser.
					"chromium": "#!/bin/sh\nexit 0\n",
					// Records how the alerting rules were checked.
					"promtool": "#!/bin/sh\necho \"$*\" >> \"$(dirname \"$0\")/promtool-ran\"\n",
				},
			} {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, body := range files {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
			env := append([]string{"PATH=" + stubs + ":/usr/bin:/bin", "TEST_DATABASE_URL=postgres://unused"}, tc.env...)
			code, _, stderr := bash(t, env, `exec "$1"`, filepath.Join(root, "scripts", "test.sh"))
			ran, _ := os.ReadFile(filepath.Join(stubs, "go-ran"))
			if code != tc.wantExit || strings.TrimSpace(string(ran)) != tc.wantGo {
				t.Fatalf("exit %d, tests ran with REQUIRE_STRIPE_MOCK=%q; want exit %d, %q\nstderr:\n%s",
					code, strings.TrimSpace(string(ran)), tc.wantExit, tc.wantGo, stderr)
			}
			if tc.wantExit != 0 && !strings.Contains(stderr, "stripe-mock could not be installed") {
				t.Fatalf("stderr does not say why:\n%s", stderr)
			}
			promtool, _ := os.ReadFile(filepath.Join(stubs, "promtool-ran"))
			if want := "check rules deploy/prometheus/alerts.yml\ntest rules deploy/prometheus/alerts_test.yml\n"; tc.wantGo != "" && string(promtool) != want {
				t.Fatalf("promtool ran %q, want %q", promtool, want)
			}
		})
	}
}

// The Dockerfile check passes on the Dockerfile and names every property
// the earlier one lacked.
func TestCheckDockerfile(t *testing.T) {
	t.Parallel()
	if code, _, stderr := bash(t, os.Environ(), `exec ./check-dockerfile.sh`); code != 0 {
		t.Fatalf("Dockerfile: exit %d\n%s", code, stderr)
	}
	old := filepath.Join(t.TempDir(), "Dockerfile")
	if err := os.WriteFile(old, []byte(`FROM golang:1.26 AS build
ENV GOTOOLCHAIN=auto
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN mkdir -p /out && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/payments ./cmd/providersim

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/payments /payments
COPY --from=build /out/providersim /providersim
USER nonroot
EXPOSE 8080
ENTRYPOINT ["/payments"]
CMD ["serve"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := bash(t, os.Environ(), `exec ./check-dockerfile.sh "$1"`, old)
	if code != 1 {
		t.Fatalf("the old Dockerfile passes: exit %d", code)
	}
	for _, want := range []string{"HEALTHCHECK", "must not contain the provider simulator", "AS providersim",
		"GOTOOLCHAIN=local", "go mod download", "older than go.mod", "stop timeout", "stamp the version", "ARG VERSION"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the check does not name %q:\n%s", want, stderr)
		}
	}
}
