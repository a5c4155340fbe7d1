package providersim

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A front passes requests while up, refuses dials while down, and accepts
// and never answers while silent; then it comes back on the same address.
func TestFront(t *testing.T) {
	t.Parallel()
	sim := New(Options{})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	f, err := NewFront("", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sim.AddFront("stripe", f)
	control := func(body string, want int) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/_sim/outages", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("control %s: %d, want %d", body, resp.StatusCode, want)
		}
	}
	control(`{"front":"mercadopago","outage":"refused"}`, http.StatusBadRequest)
	control(`{"front":"stripe","outage":"down"}`, http.StatusBadRequest)
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.URL()+"/_sim/stats", nil)
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(5 * time.Second); err != nil {
		t.Fatalf("up: %v", err)
	}
	control(`{"front":"stripe","outage":"refused"}`, http.StatusNoContent)
	before := f.Accepted()
	if err := get(5 * time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("refused: err %v, want connection refused", err)
	}
	if f.Accepted() != before {
		t.Fatalf("a refused front accepted a connection")
	}
	if err := f.Set(Silent); err != nil {
		t.Fatal(err)
	}
	if err := get(300 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("silent: err %v, want a timeout", err)
	}
	if f.Accepted() != before+1 {
		t.Fatalf("a silent front did not accept the connection")
	}
	if err := f.Set(Up); err != nil {
		t.Fatal(err)
	}
	if err := get(5 * time.Second); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
