package payment

import (
	"context"
	"encoding/json"
	"strconv"
)

// FeedEvent is an event as the feed serves it: its stored snapshot and
// its position.
type FeedEvent struct {
	Seq     int64
	Payload json.RawMessage
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
	var seq int64
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			return Page{}, fieldError("after", "must be a cursor returned as next_cursor")
		}
		seq = n
		// The position a consumer passes back is what it has processed: the
		// events after it are the backlog.
		if seq > 0 {
			if err := s.store.EventsRead(ctx, accountID, seq); err != nil {
				return Page{}, err
			}
		}
	}
	evs, err := s.store.EventsAfter(ctx, accountID, seq, limit+1)
	if err != nil {
		return Page{}, err
	}
	page := Page{Events: []json.RawMessage{}, HasMore: len(evs) > limit, NextCursor: strconv.FormatInt(seq, 10)}
	if page.HasMore {
		evs = evs[:limit]
	}
	for _, e := range evs {
		page.Events = append(page.Events, e.Payload)
		page.NextCursor = strconv.FormatInt(e.Seq, 10)
	}
	return page, nil
}
