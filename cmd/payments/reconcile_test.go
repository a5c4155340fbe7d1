package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/provider/providersim"
)

func TestReconcileOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the real binary; skipped in -short")
	}

	t.Run("PrintsOneJSONSummary", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		bin := buildBinary(t, "")
		// The authorization takes effect but its answer is lost (twice: Go's
		// transport re-sends a keyed POST once on a reused connection).
		drop := e.Sim.Inject(providersim.Fault{Op: "authorize", Kind: providersim.DropAfterEffect, Times: 2})
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-cron", Body: crashBody})
		if r.Status != http.StatusAccepted {
			t.Fatalf("create: %d %s, want 202", r.Status, r.Body)
		}
		drop.Remove()
		id := r.JSON(t)["id"].(string)

		cmd := exec.Command(bin, "reconcile", "--once")
		cmd.Env = append(os.Environ(),
			"DATABASE_URL="+e.DBURL, "STRIPE_API_BASE="+e.SimURL,
			"ENCRYPTION_KEY="+base64.StdEncoding.EncodeToString(apitest.EncryptionKey),
			"RECONCILE_AFTER=1ms")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("reconcile --once: %v\nstderr:\n%s", err, stderr.String())
		}

		out := strings.TrimSpace(stdout.String())
		if strings.Count(out, "\n") != 0 {
			t.Fatalf("stdout has more than one line:\n%s", out)
		}
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		var sum struct {
			Examined     int            `json:"examined"`
			Resolved     map[string]int `json:"resolved"`
			StillUnknown int            `json:"still_unknown"`
		}
		if err := dec.Decode(&sum); err != nil || dec.More() {
			t.Fatalf("stdout is not exactly one JSON summary (%v):\n%s", err, out)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &fields); err != nil || len(fields) != 3 {
			t.Fatalf("summary fields = %v, want examined, resolved, still_unknown", fields)
		}
		if sum.Examined != 1 || !reflect.DeepEqual(sum.Resolved, map[string]int{"authorized": 1}) || sum.StillUnknown != 0 {
			t.Fatalf("summary = %s, want {\"examined\":1,\"resolved\":{\"authorized\":1},\"still_unknown\":0}", out)
		}

		got := e.Do(apitest.Request{Method: http.MethodGet, Path: "/v1/payments/" + id})
		if got.JSON(t)["status"] != "authorized" {
			t.Fatalf("payment after the pass = %s", got.Body)
		}
		if n := e.Sim.Stats().Authorizations; n != 1 {
			t.Fatalf("authorizations at the provider = %d, want 1", n)
		}
		replay := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-cron", Body: crashBody})
		if replay.Status != http.StatusCreated || replay.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("client retry after the pass: %d %s", replay.Status, replay.Body)
		}
	})
}

func TestReconcileAudit(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the real binary; skipped in -short")
	}
	e := apitest.New(t, apitest.Options{})
	bin := buildBinary(t, "")
	r := e.Create("k-audit", `{"order_id":"audit-1","amount":2000,"currency":"BRL","payment_method":"pm_card_visa"}`)
	apitest.WantStatus(t, r, http.StatusCreated)
	if _, err := e.Sim.DashboardRefund(r.JSON(t)["provider_payment_id"].(string), 700); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "reconcile", "--audit", "--since", "1h")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+e.DBURL, "STRIPE_API_BASE="+e.SimURL,
		"ENCRYPTION_KEY="+base64.StdEncoding.EncodeToString(apitest.EncryptionKey))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("reconcile --audit: %v\nstderr:\n%s", err, stderr.String())
	}
	out := strings.TrimSpace(stdout.String())
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var sum struct {
		Examined int            `json:"examined"`
		Found    map[string]int `json:"found"`
		New      int            `json:"new"`
		Skipped  int            `json:"skipped"`
		// LookupsFailed counts refund or dispute lookups that failed.
		LookupsFailed int `json:"lookups_failed"`
	}
	if err := dec.Decode(&sum); err != nil || dec.More() || strings.Contains(out, "\n") {
		t.Fatalf("stdout is not exactly one JSON summary (%v):\n%s", err, out)
	}
	if sum.Examined != 1 || sum.New != 1 || sum.LookupsFailed != 0 || !reflect.DeepEqual(sum.Found, map[string]int{"amount_refunded_mismatch": 1}) {
		t.Fatalf("summary = %s", out)
	}
}
