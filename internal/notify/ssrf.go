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

// ErrAddressRefused is a delivery address that is not public, or a name
// that does not resolve: both get the same answer, so the check tells a
// caller nothing about the service's own network.
var ErrAddressRefused = errors.New("webhook address is not a public address")

// errUnresolved is a name that does not resolve: ErrAddressRefused to the
// caller, told apart only for the delivery metrics (a DNS outage is not an
// SSRF attempt).
var errUnresolved = fmt.Errorf("%w", ErrAddressRefused)

// refused is every block of the IANA IPv4 and IPv6 special-purpose address
// registries, with multicast and the deprecated site-local block beside
// them. The translation and tunnel blocks (NAT64, 6to4, Teredo) are refused
// whole: each can carry any IPv4 address, private ones included.
var refused = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		// IPv4 special-purpose registry.
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24",
		"192.88.99.0/24", "192.168.0.0/16", "192.175.48.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
		"224.0.0.0/4", // multicast
		// IPv6 special-purpose registry.
		"::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64",
		"100:0:0:1::/64", "2001::/23", "2001::/32", "2001:db8::/32", "2002::/16",
		"2620:4f:8000::/48", "3fff::/20", "5f00::/16", "fc00::/7", "fe80::/10",
		"fec0::/10", "ff00::/8", // deprecated site-local, multicast
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// PublicAddr is the one address policy of webhooks, at creation and at
// each connection: whether a may receive a delivery. It judges the address
// after unmapping (::ffff:127.0.0.1 is 127.0.0.1) and the embedded IPv4
// address of an IPv4-compatible one (::127.0.0.1). A zone is refused
// outright: it only means something on a non-global address, and
// netip.Prefix.Contains never matches a zoned address.
func PublicAddr(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	a = a.Unmap()
	if a.Is6() {
		b := a.As16()
		if [12]byte(b[:12]) == ([12]byte{}) {
			a = netip.AddrFrom4([4]byte(b[12:])) // IPv4-compatible, :: and ::1 included
		}
	}
	if a.Is6() && !globalUnicast.Contains(a) {
		return false // e.g. the IPv4-translated ::ffff:0:7f00:1
	}
	for _, p := range refused {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// globalUnicast is the only IPv6 space IANA allocates for global unicast;
// the rest is reserved or special.
var globalUnicast = netip.MustParsePrefix("2000::/3")

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
		// The same answer as a refused address: whether a name resolves
		// inside the service's network is none of the caller's business.
		return errUnresolved
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
