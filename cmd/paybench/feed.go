package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// feedPage is one page of GET /v1/events, reduced to what a lag reading
// needs.
type feedPage struct {
	Data []struct {
		ID        string `json:"id"`
		CreatedAt string `json:"created_at"`
	} `json:"data"`
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor"`
}

func (c *client) events(ctx context.Context, after string) (feedPage, error) {
	var p feedPage
	u := c.base + "/v1/events?limit=100"
	if after != "" {
		u += "&after=" + url.QueryEscape(after)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return p, err
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	resp, err := c.http.Do(req)
	if err != nil {
		return p, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return p, err
	}
	if resp.StatusCode != http.StatusOK {
		return p, fmt.Errorf("GET /v1/events: %d", resp.StatusCode)
	}
	return p, json.Unmarshal(b, &p)
}

// feedLag is what a consumer polling the feed all through a step saw: for
// each event, how long after the service wrote it (its created_at, taken
// before the commit) the feed first served it. It bounds the horizon's
// wait (the oldest running transaction) plus one poll. Only events served
// while the consumer was at the head count: one page of 100 per poll can
// fall behind a fast writer, and that backlog is the consumer's, not the
// feed's.
type feedLag struct {
	lags []time.Duration
	// behind counts events served while the consumer was catching up.
	behind int
	errors int
}

func (l feedLag) String() string {
	if len(l.lags) == 0 {
		return fmt.Sprintf("feed lag: no events at the head (%d behind, %d errors)", l.behind, l.errors)
	}
	s := slices.Clone(l.lags)
	slices.Sort(s)
	out := fmt.Sprintf("feed lag p50 %.1f p99 %.1f max %.1f ms (%d events)",
		ms(percentile(s, 0.50)), ms(percentile(s, 0.99)), ms(s[len(s)-1]), len(s))
	if l.behind > 0 {
		out += fmt.Sprintf(", %d more read behind the head", l.behind)
	}
	if l.errors > 0 {
		out += fmt.Sprintf(", %d poll errors", l.errors)
	}
	return out
}

// followFeed catches up with the account's feed, then polls it as a
// consumer would until stop is called, and returns the lags it saw.
func followFeed(c *client) (stop func() feedLag) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan feedLag, 1)
	var cursor string
	for ctx.Err() == nil { // catch up: history is not lag
		p, err := c.events(ctx, cursor)
		if err != nil {
			break
		}
		if p.NextCursor != "" {
			cursor = p.NextCursor
		}
		if !p.HasMore {
			break
		}
	}
	go func() {
		var l feedLag
		defer func() { done <- l }()
		// atHead: the last poll served everything visible, so what this
		// one serves became visible since.
		atHead := true
		for ctx.Err() == nil {
			p, err := c.events(ctx, cursor)
			seen := time.Now()
			if err != nil {
				if ctx.Err() == nil {
					l.errors++
				}
				continue
			}
			for _, e := range p.Data {
				at, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
				switch {
				case err != nil:
				case atHead:
					l.lags = append(l.lags, seen.Sub(at))
				default:
					l.behind++
				}
			}
			atHead = !p.HasMore
			if p.NextCursor != "" {
				cursor = p.NextCursor
			}
			if !p.HasMore && len(p.Data) == 0 {
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}()
	return func() feedLag {
		cancel()
		return <-done
	}
}
