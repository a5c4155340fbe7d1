package reach

import (
	"net/http"

	"github.com/acmepay/payments/internal/provider"
)

// Dated is rt (http.DefaultTransport when nil) with the Date of every
// answer observed on c; an absent or unreadable Date changes nothing.
func Dated(c *provider.Clock, rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return dated{c: c, rt: rt}
}

type dated struct {
	c  *provider.Clock
	rt http.RoundTripper
}

func (d dated) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.rt.RoundTrip(r)
	if err == nil {
		if t, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			d.c.Observe(t)
		}
	}
	return resp, err
}
