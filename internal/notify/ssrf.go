package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// ErrAddressRefused is a delivery address that is not public: loopback,
// private, link-local (the cloud metadata service among them), CGNAT,
// multicast or unspecified. The service must never be made to call into its
// own network.
var ErrAddressRefused = errors.New("webhook address is not a public address")

// refused are the ranges no endpoint may reach unless private addresses
// are allowed.
var refused = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // CGNAT
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, 169.254.169.254 metadata
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64 maps IPv4, private ones included
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("fc00::/7"),  // unique local
	netip.MustParsePrefix("fe80::/10"), // link-local
	netip.MustParsePrefix("fec0::/10"),
	netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("fd00:ec2::254/128"), // AWS metadata over IPv6
}

// PublicAddr reports whether a may receive webhooks.
func PublicAddr(a netip.Addr) bool {
	a = a.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	if !a.IsValid() {
		return false
	}
	for _, p := range refused {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// Guard checks endpoint URLs and dials deliveries. AllowPrivate
// (WEBHOOK_ALLOW_PRIVATE) lifts every check, for local runs and tests.
type Guard struct {
	AllowPrivate bool
	// Resolver looks names up; nil is net.DefaultResolver.
	Resolver *net.Resolver
}

// CheckURL is the check at creation and before each delivery: an absolute
// https URL whose host resolves only to public addresses.
func (g Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" || len(raw) > 2048 {
		return errors.New("must be an absolute https URL without user info or fragment, at most 2048 characters")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && g.AllowPrivate:
	default:
		return errors.New("must be an https URL")
	}
	if g.AllowPrivate {
		return nil
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		if !PublicAddr(a) {
			return ErrAddressRefused
		}
		return nil
	}
	r := g.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("the host does not resolve")
	}
	// Every address: the dialer may pick any of them.
	for _, a := range addrs {
		if !PublicAddr(a) {
			return ErrAddressRefused
		}
	}
	return nil
}

// control runs after the name is resolved and before the connection is
// made, on the address actually dialled: a name that resolved to a public
// address at the check and to a private one now (DNS rebinding) is caught
// here.
func (g Guard) control(_, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !PublicAddr(ap.Addr()) {
		return ErrAddressRefused
	}
	return nil
}

// Client is the HTTP client of deliveries: the timeout of a delivery, no
// redirects followed (a 3xx is a failed attempt), no proxy from the
// environment, and every connection checked by control.
func (g Guard) Client(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout, Control: g.control, Resolver: g.Resolver}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:           d.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
