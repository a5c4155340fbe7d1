package retention_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/apitest"
	"github.com/acmepay/payments/internal/logging"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/retention"
)

// logLines returns the decoded JSON log lines with the given message.
func logLines(t *testing.T, logs *apitest.SyncBuffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", sc.Text(), err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// waitFor polls cond until it holds or a few seconds have passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runUntil starts Run and returns a function that stops it and waits for it
// to return.
func runUntil(t *testing.T, p *retention.Purger) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("Run did not return after its context was canceled")
		}
	}
}

type failingStore struct{}

func (failingStore) IdempotencyKeyPurgeResponses(context.Context, time.Time, time.Time, int) (int, error) {
	return 0, errors.New("connection refused")
}

func (failingStore) IdempotencyKeyDeleteTombstones(context.Context, time.Time, int) (int, error) {
	return 0, errors.New("connection refused")
}

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("LogsEachRunWithCounts", func(t *testing.T) {
		t.Parallel()
		e := apitest.New(t, apitest.Options{})
		r := e.Do(apitest.Request{Method: http.MethodPost, Path: "/v1/payments", Key: "k-1", Body: createBody("pedido-1", 2000)})
		if r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		e.Clock.Advance(responseTTL + time.Minute)
		p, err := retention.New(retention.Config{
			Store: postgres.NewRetentionStore(e.DB), Now: e.Clock.Now, ResponseTTL: responseTTL,
			TombstoneTTL: tombstoneTTL, Interval: 10 * time.Millisecond, Logger: e.Logger(),
		})
		if err != nil {
			t.Fatalf("retention.New: %v", err)
		}
		stop := runUntil(t, p)
		waitFor(t, "two runs", func() bool { return len(logLines(t, e.Logs, "idempotency retention")) >= 2 })
		stop()

		lines := logLines(t, e.Logs, "idempotency retention")
		// The first run purges at start; later runs find nothing left.
		if got := []any{lines[0]["purged"], lines[0]["deleted"], lines[1]["purged"]}; got[0] != 1.0 || got[1] != 0.0 || got[2] != 0.0 {
			t.Fatalf("purged, deleted, then purged = %v, want [1 0 0]", got)
		}
		if lines[0]["level"] != "INFO" {
			t.Fatalf("level = %v, want INFO", lines[0]["level"])
		}
	})

	t.Run("LogsErrorsAndKeepsRunning", func(t *testing.T) {
		t.Parallel()
		logs := &apitest.SyncBuffer{}
		p, err := retention.New(retention.Config{
			Store: failingStore{}, ResponseTTL: responseTTL, TombstoneTTL: tombstoneTTL,
			Interval: 10 * time.Millisecond, Logger: logging.New(logs, slog.LevelInfo),
		})
		if err != nil {
			t.Fatalf("retention.New: %v", err)
		}
		stop := runUntil(t, p)
		waitFor(t, "two failed runs", func() bool { return len(logLines(t, logs, "idempotency retention failed")) >= 2 })
		stop()

		line := logLines(t, logs, "idempotency retention failed")[0]
		if line["level"] != "ERROR" || !strings.Contains(line["error"].(string), "connection refused") {
			t.Fatalf("error line = %v", line)
		}
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	valid := func() retention.Config {
		return retention.Config{Store: failingStore{}, ResponseTTL: time.Hour, TombstoneTTL: 2 * time.Hour, Interval: time.Minute}
	}
	tests := []struct {
		name   string
		change func(*retention.Config)
		ok     bool
	}{
		{"Valid", func(*retention.Config) {}, true},
		{"EqualWindows", func(c *retention.Config) { c.TombstoneTTL = c.ResponseTTL }, true},
		{"NoStore", func(c *retention.Config) { c.Store = nil }, false},
		{"ZeroResponseTTL", func(c *retention.Config) { c.ResponseTTL = 0 }, false},
		{"NegativeTombstoneTTL", func(c *retention.Config) { c.TombstoneTTL = -time.Hour }, false},
		{"ZeroInterval", func(c *retention.Config) { c.Interval = 0 }, false},
		{"TombstoneShorterThanResponse", func(c *retention.Config) { c.TombstoneTTL = c.ResponseTTL - time.Second }, true},
		{"NegativeBatchSize", func(c *retention.Config) { c.BatchSize = -1 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := valid()
			tt.change(&cfg)
			_, err := retention.New(cfg)
			if got := err == nil; got != tt.ok {
				t.Fatalf("New error = %v, want ok %v", err, tt.ok)
			}
		})
	}
}
