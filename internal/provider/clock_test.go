package provider

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestClockAhead(t *testing.T) {
	local := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	c := NewClock(func() time.Time { return local })
	if got := c.Ahead(); got != 0 {
		t.Fatalf("Ahead before any answer = %v, want 0", got)
	}
	c.Observe(local.Add(2 * time.Hour).Format(http.TimeFormat))
	if got := c.Ahead(); got != 2*time.Hour-time.Second {
		t.Fatalf("Ahead = %v, want 2h less a second of Date's rounding", got)
	}
	c.Observe("not a date")
	if got := c.Ahead(); got != 2*time.Hour-time.Second {
		t.Fatalf("an unreadable Date changed Ahead to %v", got)
	}
	c.Observe(local.Add(-time.Hour).Format(http.TimeFormat))
	if got := c.Ahead(); got != 0 {
		t.Fatalf("Ahead of a provider behind = %v, want 0", got)
	}
}

func TestClockTransportReadsDate(t *testing.T) {
	local := time.Now().UTC().Truncate(time.Second)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", local.Add(10*time.Minute).Format(http.TimeFormat))
	}))
	defer srv.Close()
	c := NewClock(func() time.Time { return local })
	resp, err := (&http.Client{Transport: c.Transport(nil)}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := c.Ahead(); got != 10*time.Minute-time.Second {
		t.Fatalf("Ahead = %v, want the answer's Date less a second", got)
	}
}
