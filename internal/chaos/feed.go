package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// feedLimits are the page sizes the feed is read at in the end: a page of
// one, a few, and the most a consumer is likely to ask.
var feedLimits = []int{1, 3, 100}

// feedTally is the events feed, read to its end once per page size,
// against the events table.
type feedTally struct {
	Stored int         // events of the account in the database
	Served map[int]int // page size -> distinct events a full read served
	// Missed is stored events a read did not serve; Repeated events a read
	// served more than once; both summed over the reads.
	Missed, Repeated int
}

// Errors is the events the feed failed to serve exactly once.
func (f feedTally) Errors() int { return f.Missed + f.Repeated }

func (f feedTally) String() string {
	limits := make([]int, 0, len(f.Served))
	for l := range f.Served {
		limits = append(limits, l)
	}
	sort.Ints(limits)
	parts := make([]string, 0, len(limits))
	for _, l := range limits {
		parts = append(parts, fmt.Sprintf("limit %d served %d", l, f.Served[l]))
	}
	return fmt.Sprintf("%d (%d events stored; %s; never served %d, served twice %d)",
		f.Errors(), f.Stored, strings.Join(parts, ", "), f.Missed, f.Repeated)
}

// checkFeed holds each full read of the feed (by page size) against the
// stored events: each must serve every one of them exactly once.
func (r *Report) checkFeed(stored []string, reads map[int][]string) {
	t := feedTally{Stored: len(stored), Served: map[int]int{}}
	for limit, ids := range reads {
		n := make(map[string]int, len(ids))
		for _, id := range ids {
			if n[id]++; n[id] == 2 {
				t.Repeated++
				r.sample("feed error: at limit %d event %s was served more than once", limit, id)
			}
		}
		t.Served[limit] = len(n)
		for _, id := range stored {
			if n[id] == 0 {
				t.Missed++
				r.sample("feed error: at limit %d event %s is stored but was never served", limit, id)
			}
		}
	}
	r.Feed = t
}

// readFeeds reads the stored events, then the whole feed at each page
// size. An event committed just before may still be behind the feed's
// horizon (an older transaction of the replica still running), so a read
// that misses events is tried again, a few times, before it counts.
func readFeeds(ctx context.Context, shop *merchant, base, apiKey, dbURL, accountID string) (stored []string, reads map[int][]string, err error) {
	reads = map[int][]string{}
	for try := 0; try < 5; try++ {
		if stored, err = storedEvents(ctx, dbURL, accountID); err != nil {
			return nil, nil, err
		}
		complete := true
		for _, limit := range feedLimits {
			if reads[limit], err = shop.feed(ctx, base, apiKey, limit); err != nil {
				return nil, nil, err
			}
			complete = complete && servesAll(stored, reads[limit])
		}
		if complete {
			break
		}
		sleep(ctx, time.Second)
	}
	return stored, reads, nil
}

func servesAll(stored, ids []string) bool {
	served := make(map[string]bool, len(ids))
	for _, id := range ids {
		served[id] = true
	}
	for _, id := range stored {
		if !served[id] {
			return false
		}
	}
	return true
}

// storedEvents is the ids of the account's events in the database, read
// directly so that the check does not trust the code under test.
func storedEvents(ctx context.Context, dbURL, accountID string) ([]string, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id FROM events WHERE account_id = $1`, accountID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
