package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// feedEntry is one event as the feed served it.
type feedEntry struct {
	ID        string
	PaymentID string
	Version   int64
}

// feedPosition is a cursor the feed handed out, and how many events of
// the read came before it.
type feedPosition struct {
	Index  int
	Cursor string
}

// resumeRead is a read of the feed from a cursor to its end: it must
// serve what the full read served after that cursor, then at most events
// the full read had not seen yet.
type resumeRead struct {
	From   int // index in the full read of the first event it must serve
	IDs    []string
	Origin string // "page" or "webhook": where the cursor came from
}

// readFeedHistory reads the feed from after to its end, limit a page,
// with every event's payment and version and every page's cursor.
func readFeedHistory(ctx context.Context, m *merchant, base, apiKey string, limit int, after string) ([]feedEntry, []feedPosition, error) {
	var out []feedEntry
	var pos []feedPosition
	for {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if after != "" {
			q.Set("after", after)
		}
		status, b, err := m.call(ctx, http.MethodGet, base+"/v1/events?"+q.Encode(), apiKey, "", nil)
		if err != nil {
			return nil, nil, err
		}
		if status != http.StatusOK {
			return nil, nil, fmt.Errorf("chaos: GET /v1/events: %d", status)
		}
		var page struct {
			Data []struct {
				ID      string `json:"id"`
				Payment *struct {
					ID      string `json:"id"`
					Version int64  `json:"version"`
				} `json:"payment"`
			} `json:"data"`
			HasMore    bool   `json:"has_more"`
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, nil, err
		}
		for _, ev := range page.Data {
			e := feedEntry{ID: ev.ID}
			if ev.Payment != nil {
				e.PaymentID, e.Version = ev.Payment.ID, ev.Payment.Version
			}
			out = append(out, e)
		}
		if page.NextCursor != "" {
			pos = append(pos, feedPosition{Index: len(out), Cursor: page.NextCursor})
		}
		if !page.HasMore {
			return out, pos, nil
		}
		after = page.NextCursor
	}
}

// feedResumes is how many cursors of each origin are read again.
const feedResumes = 8

// resumeFeed reads the feed again from a spread of the full read's page
// cursors and of the cursors the merchant's webhooks carried.
func resumeFeed(ctx context.Context, m *merchant, base, apiKey string, full []feedEntry, pos []feedPosition, hooks []received) ([]resumeRead, error) {
	index := make(map[string]int, len(full))
	for i, e := range full {
		index[e.ID] = i
	}
	var from []resumeRead
	var cursors []string
	for i := 0; i < feedResumes && len(pos) > 0; i++ {
		p := pos[i*len(pos)/feedResumes]
		from, cursors = append(from, resumeRead{From: p.Index, Origin: "page"}), append(cursors, p.Cursor)
	}
	for i := 0; i < feedResumes && len(hooks) > 0; i++ {
		h := hooks[i*len(hooks)/feedResumes]
		if at, ok := index[h.ID]; ok && h.Cursor != "" {
			from, cursors = append(from, resumeRead{From: at + 1, Origin: "webhook"}), append(cursors, h.Cursor)
		}
	}
	for i := range from {
		got, _, err := readFeedHistory(ctx, m, base, apiKey, 50, cursors[i])
		if err != nil {
			return nil, err
		}
		for _, e := range got {
			from[i].IDs = append(from[i].IDs, e.ID)
		}
	}
	return from, nil
}

// feedHistoryTally is the feed's and the webhooks' histories against the
// committed events (whose exactly-once reads checkFeed counts).
type feedHistoryTally struct {
	Reads        int // full reads held to one order
	Resumes      int // reads from a cursor
	OutOfOrder   int // reads that served two events in another order than the full read, or a payment's versions backward
	NotResumable int // reads from a cursor that skipped or repeated an event
	Hooks        int // deliveries the merchant's endpoint accepted
	Uncommitted  int // deliveries of an event the database does not have
}

func (t feedHistoryTally) violations() int { return t.OutOfOrder + t.NotResumable + t.Uncommitted }

// checkFeedHistory holds every read of the feed to the full read's order,
// each payment's events to growing versions, each read from a cursor to
// the suffix after it, and every webhook to a committed event. Unique and
// complete reads are checkFeed's, the delivery of every event
// checkMerchant's.
func checkFeedHistory(committed []string, reads map[int][]string, full []feedEntry, resumes []resumeRead, hooks []received, sample func(string, ...any)) feedHistoryTally {
	t := feedHistoryTally{Reads: len(reads) + 1, Resumes: len(resumes), Hooks: len(hooks)}
	index := make(map[string]int, len(full))
	version := map[string]int64{}
	for i, e := range full {
		index[e.ID] = i
		if e.PaymentID == "" {
			continue
		}
		if v, ok := version[e.PaymentID]; ok && e.Version < v {
			t.OutOfOrder++
			sample("feed order: event %s serves payment %s at version %d after version %d", e.ID, e.PaymentID, e.Version, v)
		}
		version[e.PaymentID] = max(version[e.PaymentID], e.Version)
	}
	for limit, ids := range reads {
		if at := disorder(ids, index); at != "" {
			t.OutOfOrder++
			sample("feed order: at limit %d event %s came before an event the full read serves before it", limit, at)
		}
	}
	for _, r := range resumes {
		if bad := notSuffix(r, full, index); bad != "" {
			t.NotResumable++
			sample("feed resume: from a %s cursor before event %d of %d: %s", r.Origin, r.From, len(full), bad)
		}
	}
	known := make(map[string]bool, len(committed)+len(full))
	for _, id := range committed {
		known[id] = true
	}
	for _, e := range full {
		known[e.ID] = true
	}
	for _, h := range hooks {
		if !known[h.ID] {
			t.Uncommitted++
			sample("webhook %s delivers an event the database does not have", h.ID)
		}
	}
	return t
}

// disorder is the first id of a read served before an id the full read
// has before it; "" when the read keeps the full read's order.
func disorder(ids []string, index map[string]int) string {
	last := -1
	for _, id := range ids {
		i, ok := index[id]
		if !ok {
			continue
		}
		if i < last {
			return id
		}
		last = i
	}
	return ""
}

// notSuffix says how a read from a cursor differs from the full read
// after it; "" when it serves exactly that, then only new events.
func notSuffix(r resumeRead, full []feedEntry, index map[string]int) string {
	want := full[min(r.From, len(full)):]
	if len(r.IDs) < len(want) {
		return fmt.Sprintf("served %d events, %d follow the cursor", len(r.IDs), len(want))
	}
	for i, e := range want {
		if r.IDs[i] != e.ID {
			return fmt.Sprintf("served %s where %s follows", r.IDs[i], e.ID)
		}
	}
	for _, id := range r.IDs[len(want):] {
		if _, ok := index[id]; ok {
			return fmt.Sprintf("served %s again after the events that follow the cursor", id)
		}
	}
	return ""
}
