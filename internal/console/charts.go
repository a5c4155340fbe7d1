package console

import (
	"context"
	"fmt"
	"html/template"
	"sort"
	"strings"
	"sync"
	"time"
)

// HourCount is one provider's hour: payments created, or authorization
// attempts with their outcomes so far.
type HourCount struct {
	Provider                            string
	Hour                                time.Time
	Total, Succeeded, Declined, Unknown int64
}

// Activity is the last day by provider and hour.
type Activity struct {
	Payments       []HourCount
	Authorizations []HourCount
}

// providerChart is one provider's last 24 hours, drawn on the server as
// SVG (no script, nothing inline the console's CSP refuses).
type providerChart struct {
	Provider string
	Payments int64
	// Rates over the day's authorization attempts, in percent.
	AuthRate, DeclineRate, UnknownShare string
	Volume, Rates                       template.HTML
}

const (
	chartHours = 24
	chartW     = 480
	chartH     = 120
	// chartTTL: the overview reads a day of rows; operators reloading it
	// share one read a minute.
	chartTTL = time.Minute
)

// chartCache holds the last charts drawn.
type chartCache struct {
	mu     sync.Mutex
	at     time.Time
	charts []providerChart
}

// charts are the overview's per-provider charts of the last 24 hours.
func (c *Console) charts(ctx context.Context) ([]providerChart, error) {
	now := c.cfg.Now()
	c.chartCache.mu.Lock()
	defer c.chartCache.mu.Unlock()
	if c.chartCache.charts != nil && now.Sub(c.chartCache.at) < chartTTL {
		return c.chartCache.charts, nil
	}
	first := now.Truncate(time.Hour).Add(-(chartHours - 1) * time.Hour)
	a, err := c.cfg.Store.ConsoleActivityByHour(ctx, first)
	if err != nil {
		return nil, err
	}
	c.chartCache.at, c.chartCache.charts = now, drawCharts(a, first)
	return c.chartCache.charts, nil
}

// drawCharts makes one chart per provider seen in the day, by name.
func drawCharts(a Activity, first time.Time) []providerChart {
	type series struct{ pays, auths [chartHours]HourCount }
	by := map[string]*series{}
	slot := func(h HourCount) (*series, int, bool) {
		i := int(h.Hour.Sub(first) / time.Hour)
		if i < 0 || i >= chartHours {
			return nil, 0, false
		}
		if by[h.Provider] == nil {
			by[h.Provider] = &series{}
		}
		return by[h.Provider], i, true
	}
	for _, h := range a.Payments {
		if s, i, ok := slot(h); ok {
			s.pays[i] = h
		}
	}
	for _, h := range a.Authorizations {
		if s, i, ok := slot(h); ok {
			s.auths[i] = h
		}
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]providerChart, 0, len(names))
	for _, n := range names {
		s := by[n]
		ch := providerChart{Provider: n, Volume: volumeSVG(n, s.pays[:], first), Rates: ratesSVG(n, s.auths[:], first)}
		var tot HourCount
		for i := range chartHours {
			ch.Payments += s.pays[i].Total
			tot.Total += s.auths[i].Total
			tot.Succeeded += s.auths[i].Succeeded
			tot.Declined += s.auths[i].Declined
			tot.Unknown += s.auths[i].Unknown
		}
		auth, decl, unk, ok := rates(tot)
		if ok {
			ch.AuthRate, ch.DeclineRate, ch.UnknownShare = pct(auth), pct(decl), pct(unk)
		}
		out = append(out, ch)
	}
	return out
}

// rates of a set of authorization attempts: authorized and declined among
// those decided, unknown among all; ok false when there were none.
func rates(h HourCount) (auth, decl, unk float64, ok bool) {
	if h.Total == 0 {
		return 0, 0, 0, false
	}
	if decided := h.Total - h.Unknown; decided > 0 {
		auth = float64(h.Succeeded) / float64(decided)
		decl = float64(h.Declined) / float64(decided)
	}
	return auth, decl, float64(h.Unknown) / float64(h.Total), true
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// volumeSVG draws payments per hour as bars, the tallest at full height.
func volumeSVG(provider string, hours []HourCount, first time.Time) template.HTML {
	var peak int64 = 1
	for _, h := range hours {
		peak = max(peak, h.Total)
	}
	var b strings.Builder
	svgOpen(&b, fmt.Sprintf("Payments per hour at %s, last 24 hours (peak %d)", provider, peak))
	bw := float64(chartW) / chartHours
	for i, h := range hours {
		ht := float64(h.Total) / float64(peak) * (chartH - 20)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#3b6ea8"><title>%s: %d payments</title></rect>`,
			float64(i)*bw+1, chartH-10-ht, bw-2, ht, hourLabel(first, i), h.Total)
	}
	fmt.Fprintf(&b, `<text x="2" y="10" font-size="10" fill="#555">%d/h</text>`, peak)
	svgAxis(&b, first)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// ratesSVG draws, per hour, the authorization rate, the decline rate and
// the share left unknown, on 0–100%.
func ratesSVG(provider string, hours []HourCount, first time.Time) template.HTML {
	var b strings.Builder
	svgOpen(&b, fmt.Sprintf("Authorization rate, decline rate and share unknown at %s, by hour, last 24 hours", provider))
	lines := []struct {
		name, color string
		of          func(a, d, u float64) float64
	}{
		{"authorized", "#2e7d32", func(a, _, _ float64) float64 { return a }},
		{"declined", "#ef6c00", func(_, d, _ float64) float64 { return d }},
		{"unknown", "#c62828", func(_, _, u float64) float64 { return u }},
	}
	bw := float64(chartW) / chartHours
	for li, l := range lines {
		var pts []string
		for i, h := range hours {
			a, d, u, ok := rates(h)
			if !ok {
				continue
			}
			x, y := float64(i)*bw+bw/2, chartH-10-l.of(a, d, u)*(chartH-20)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s"><title>%s: %s %s of %d</title></circle>`,
				x, y, l.color, hourLabel(first, i), pct(l.of(a, d, u)), l.name, h.Total)
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, strings.Join(pts, " "), l.color)
		}
		fmt.Fprintf(&b, `<text x="%d" y="10" font-size="10" fill="%s">%s</text>`, 40+li*90, l.color, l.name)
	}
	b.WriteString(`<text x="2" y="10" font-size="10" fill="#555">100%</text>`)
	svgAxis(&b, first)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func svgOpen(b *strings.Builder, label string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		chartW, chartH, chartW, chartH, template.HTMLEscapeString(label))
	fmt.Fprintf(b, `<line x1="0" y1="%d" x2="%d" y2="%d" stroke="#999" stroke-width="1"/>`, chartH-10, chartW, chartH-10)
}

// svgAxis labels every sixth hour.
func svgAxis(b *strings.Builder, first time.Time) {
	bw := float64(chartW) / chartHours
	for i := 0; i < chartHours; i += 6 {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="9" fill="#555">%s</text>`, float64(i)*bw+1, chartH-1, first.Add(time.Duration(i)*time.Hour).UTC().Format("15:04"))
	}
}

func hourLabel(first time.Time, i int) string {
	return first.Add(time.Duration(i) * time.Hour).UTC().Format("Jan 2 15:04Z")
}
