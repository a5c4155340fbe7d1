package payment

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
)

// The feed without a per-account lock. Each event records the id of the
// transaction that wrote it (pg_current_xact_id(), a 64-bit xid8 that never
// wraps around) and a seq drawn from a sequence. Neither makes two writers
// of one account wait for each other: no row is locked that every write
// locks. Both are allocated before commit, so neither follows commit order
// by itself: a transaction with a small xid may commit after one with a
// larger xid whose events a consumer has already read. The feed therefore
// serves only events of transactions older than the oldest transaction
// still running (pg_snapshot_xmin of the reading statement's snapshot).
// Every transaction below that horizon has ended, committed or rolled back,
// and is visible or gone for good; every transaction that has yet to write
// gets a larger xid than any in the snapshot. So the set of events below
// the horizon only grows at its top, and in (xid, seq) order a position a
// consumer has passed never gets a new event behind it. Events of one
// transaction share an xid and follow each other by seq, their order of
// insertion. The price is lag: the feed holds back every event written after
// the oldest running transaction began (one with an xid, of any database of
// the cluster), and a long transaction holds the feed for as long as it
// runs; the payments_events_feed_lag_seconds gauge shows it.

// FeedPosition is a place in an account's feed: after the events of
// transactions below Xid, and after those of Xid up to Seq. The zero
// position is the start.
type FeedPosition struct {
	Xid uint64
	Seq int64
}

// String encodes the position as an opaque cursor.
func (p FeedPosition) String() string {
	return strconv.FormatUint(p.Xid, 10) + "." + strconv.FormatInt(p.Seq, 10)
}

// ParseFeedCursor decodes a next_cursor. A bare number is a cursor of the
// feed before transaction ids were recorded: events written then carry xid
// 0 and their old per-account number, so it keeps its place.
func ParseFeedCursor(s string) (FeedPosition, bool) {
	xs, ss, found := strings.Cut(s, ".")
	if !found {
		xs, ss = "0", s
	}
	x, err := strconv.ParseUint(xs, 10, 64)
	if err != nil || (found && xs != strconv.FormatUint(x, 10)) {
		return FeedPosition{}, false
	}
	n, err := strconv.ParseInt(ss, 10, 64)
	if err != nil || n < 0 || ss != strconv.FormatInt(n, 10) {
		return FeedPosition{}, false
	}
	return FeedPosition{Xid: x, Seq: n}, true
}

// FeedEvent is an event as the feed serves it: its stored snapshot and
// its position.
type FeedEvent struct {
	Position FeedPosition
	Payload  json.RawMessage
}

// Page is one page of the events feed.
type Page struct {
	Events     []json.RawMessage
	HasMore    bool
	NextCursor string
}

// Events returns the account's events after a cursor, oldest first. The
// cursor is opaque to clients: pass next_cursor back as after, also when
// has_more is false, to keep polling.
func (s *Service) Events(ctx context.Context, accountID, after string, limit int) (Page, error) {
	var pos FeedPosition
	if after != "" {
		p, ok := ParseFeedCursor(after)
		if !ok {
			return Page{}, fieldError("after", "must be a cursor returned as next_cursor")
		}
		pos = p
		// The position a consumer passes back is what it has processed: the
		// events after it are the backlog.
		if pos != (FeedPosition{}) {
			if err := s.store.AccountFeedCursorAdvance(ctx, accountID, pos, s.clock()); err != nil {
				return Page{}, err
			}
		}
	}
	evs, err := s.store.EventListAfter(ctx, accountID, pos, limit+1)
	if err != nil {
		return Page{}, err
	}
	page := Page{Events: []json.RawMessage{}, HasMore: len(evs) > limit, NextCursor: pos.String()}
	if page.HasMore {
		evs = evs[:limit]
	}
	for _, e := range evs {
		page.Events = append(page.Events, e.Payload)
		page.NextCursor = e.Position.String()
	}
	return page, nil
}
