// Package authlimit limits failed admin authentications per client
// address: once Max failures fall within the last Window, the address is
// refused, whatever token it carries, until fewer than Max do.
//
// It keeps, per address, the times of its last Max failures: the refusal
// lasts exactly until the oldest of them leaves the window. A token bucket
// (golang.org/x/time/rate) would let one guess through every Window/Max
// while Max failures are still within the window, which is not that rule.
// Memory is bounded: at most Capacity addresses are kept, the one whose
// last failure is the oldest is forgotten first.
package authlimit

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultMax      = 10
	DefaultWindow   = time.Minute
	DefaultCapacity = 10_000
)

// Config tunes a Limiter; zero values take the defaults.
type Config struct {
	Max      int
	Window   time.Duration
	Capacity int
	// TrustedProxies are the peers whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix
	Now            func() time.Time
}

// Limiter is safe for concurrent use; one is shared by every door to the
// admin token (the admin API and the console's sign-in).
type Limiter struct {
	cfg   Config
	mu    sync.Mutex
	byKey map[netip.Prefix]*list.Element
	order *list.List // of *entry, the most recent failure first
}

type entry struct {
	key   netip.Prefix
	fails []time.Time // oldest first, at most Max
}

// New returns a Limiter.
func New(c Config) *Limiter {
	if c.Max <= 0 {
		c.Max = DefaultMax
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Capacity <= 0 {
		c.Capacity = DefaultCapacity
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Limiter{cfg: c, byKey: map[netip.Prefix]*list.Element{}, order: list.New()}
}

// Client is the address a request is counted against: the connection's
// peer, or, when the peer is a trusted proxy, the nearest address in
// X-Forwarded-For that is not one. An IPv6 client is its /64, the
// smallest block one host is usually given.
func (l *Limiter) Client(r *http.Request) netip.Prefix {
	addr := peer(r.RemoteAddr)
	if l.trusted(addr) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a, ok := parseHop(hops[i])
			if !ok {
				break
			}
			addr = a
			if !l.trusted(addr) {
				break
			}
		}
	}
	if !addr.IsValid() {
		return netip.Prefix{}
	}
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, _ := addr.Prefix(bits)
	return p
}

func (l *Limiter) trusted(a netip.Addr) bool {
	for _, p := range l.cfg.TrustedProxies {
		if a.IsValid() && p.Contains(a) {
			return true
		}
	}
	return false
}

func peer(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, _ := parseHop(host)
	return a
}

// parseHop reads one X-Forwarded-For entry: an address, maybe with a port
// or in brackets.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// Blocked reports whether client has Max failures within the window, and
// then how long until it has fewer.
func (l *Limiter) Blocked(client netip.Prefix) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.byKey[client]
	if !ok {
		return 0, false
	}
	fails := el.Value.(*entry).fails
	if len(fails) < l.cfg.Max {
		return 0, false
	}
	wait := fails[0].Add(l.cfg.Window).Sub(l.cfg.Now())
	return wait, wait > 0
}

// Fail records a failed authentication of client and reports whether it
// has now reached the limit.
func (l *Limiter) Fail(client netip.Prefix) bool {
	now := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.byKey[client]
	if ok {
		l.order.MoveToFront(el)
	} else {
		el = l.order.PushFront(&entry{key: client, fails: make([]time.Time, 0, l.cfg.Max)})
		l.byKey[client] = el
		if l.order.Len() > l.cfg.Capacity {
			oldest := l.order.Back()
			l.order.Remove(oldest)
			delete(l.byKey, oldest.Value.(*entry).key)
		}
	}
	e := el.Value.(*entry)
	if len(e.fails) == l.cfg.Max {
		copy(e.fails, e.fails[1:])
		e.fails = e.fails[:l.cfg.Max-1]
	}
	e.fails = append(e.fails, now)
	return len(e.fails) == l.cfg.Max && now.Sub(e.fails[0]) < l.cfg.Window
}

// Len is how many addresses are kept.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.order.Len()
}

// RetryAfter is a Retry-After value for wait: whole seconds, at least 1.
func RetryAfter(wait time.Duration) string {
	s := int64((wait + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}
