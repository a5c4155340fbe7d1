package reach

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

func TestDatedReadsDate(t *testing.T) {
	local := time.Now().UTC().Truncate(time.Second)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", local.Add(10*time.Minute).Format(http.TimeFormat))
	}))
	defer srv.Close()
	c := provider.NewClock(func() time.Time { return local })
	resp, err := (&http.Client{Transport: Dated(c, nil)}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := c.Ahead(); got != 10*time.Minute-time.Second {
		t.Fatalf("Ahead = %v, want the answer's Date less a second", got)
	}
}

// An answer without a readable Date changes nothing.
func TestDatedIgnoresABadDate(t *testing.T) {
	local := time.Now().UTC().Truncate(time.Second)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = []string{"not a date"}
	}))
	defer srv.Close()
	c := provider.NewClock(func() time.Time { return local })
	c.Observe(local.Add(time.Hour))
	resp, err := (&http.Client{Transport: Dated(c, nil)}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := c.Ahead(); got != time.Hour-time.Second {
		t.Fatalf("an unreadable Date changed Ahead to %v", got)
	}
}
