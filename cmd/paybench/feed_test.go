package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The follower skips the history it finds, then records the lag of each
// new event served at the head, from its created_at to when a poll served
// it, and counts those read while catching up apart.
func TestFollowFeed(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	type ev struct{ id, at string }
	feed := []ev{{"evt_old1", "2020-01-01T00:00:00.000000Z"}, {"evt_old2", "2020-01-01T00:00:01.000000Z"}}
	served := make(chan struct{}, 1)
	var polls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		from := 0
		if a := r.URL.Query().Get("after"); a != "" {
			fmt.Sscanf(a, "c%d", &from)
		}
		var data []string
		for i := from; i < len(feed) && i < from+1; i++ { // one per page: paging is exercised
			data = append(data, fmt.Sprintf(`{"id":%q,"created_at":%q}`, feed[i].id, feed[i].at))
		}
		next := from + len(data)
		fmt.Fprintf(w, `{"object":"list","data":[%s],"has_more":%t,"next_cursor":"c%d"}`,
			strings.Join(data, ","), next < len(feed), next)
		if polls.Add(1) > 3 && len(data) == 0 {
			select {
			case served <- struct{}{}:
			default:
			}
		}
	}))
	defer srv.Close()
	c := newClient(srv.URL, "k", &atomic.Int64{})
	defer c.close()

	stop := followFeed(c)
	mu.Lock()
	written := time.Now().Add(-40 * time.Millisecond)
	// Two at once: the first poll serves one and says there is more, so
	// the second was read behind the head and is not a lag reading.
	at := written.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	feed = append(feed, ev{"evt_new", at}, ev{"evt_next", at})
	mu.Unlock()
	for range 2 { // two empty polls after the new event: it was taken
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatal("the follower stopped polling")
		}
	}
	l := stop()
	if len(l.lags) != 1 || l.behind != 1 || l.errors != 0 {
		t.Fatalf("lags %v, behind %d, errors %d: want one reading at the head and one behind", l.lags, l.behind, l.errors)
	}
	if l.lags[0] < 40*time.Millisecond || l.lags[0] > 10*time.Second {
		t.Errorf("lag %v, want at least the 40 ms since it was written", l.lags[0])
	}
	if s := l.String(); !strings.Contains(s, "(1 events), 1 more read behind the head") {
		t.Errorf("String() = %q", s)
	}
}
