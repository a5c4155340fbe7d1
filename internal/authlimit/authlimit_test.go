package authlimit

import (
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newTestLimiter(c Config) (*Limiter, *clock) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Now = clk.Now
	return New(c), clk
}

func TestTenFailuresWithinAMinuteBlockUntilFewerAreWithin(t *testing.T) {
	l, clk := newTestLimiter(Config{})
	a := netip.MustParsePrefix("203.0.113.7/32")
	for i := range 10 {
		if _, blocked := l.Blocked(a); blocked {
			t.Fatalf("blocked after %d failures", i)
		}
		reached := l.Fail(a)
		if reached != (i == 9) {
			t.Fatalf("failure %d: reached = %v", i+1, reached)
		}
		clk.Advance(time.Second)
	}
	// The first failure is 10 s old: blocked for 50 s more.
	wait, blocked := l.Blocked(a)
	if !blocked || wait != 50*time.Second {
		t.Fatalf("after 10 failures: blocked %v for %v, want 50s", blocked, wait)
	}
	other := netip.MustParsePrefix("203.0.113.8/32")
	if _, blocked := l.Blocked(other); blocked {
		t.Fatal("another address is blocked")
	}
	clk.Advance(49 * time.Second)
	if wait, blocked := l.Blocked(a); !blocked || wait != time.Second {
		t.Fatalf("1 s before the first failure leaves the window: blocked %v for %v", blocked, wait)
	}
	clk.Advance(time.Second)
	if _, blocked := l.Blocked(a); blocked {
		t.Fatal("still blocked with 9 failures in the window")
	}
	// One more failure makes 10 in the window again, until the second
	// oldest (at 1 s) leaves it.
	l.Fail(a)
	if wait, blocked := l.Blocked(a); !blocked || wait != time.Second {
		t.Fatalf("after an eleventh failure: blocked %v for %v, want 1s", blocked, wait)
	}
}

func TestSpreadFailuresNeverBlock(t *testing.T) {
	l, clk := newTestLimiter(Config{})
	a := netip.MustParsePrefix("198.51.100.1/32")
	for i := range 100 {
		if _, blocked := l.Blocked(a); blocked {
			t.Fatalf("blocked at failure %d with one failure every 7 s", i)
		}
		l.Fail(a)
		clk.Advance(7 * time.Second)
	}
}

func TestMemoryIsBounded(t *testing.T) {
	l, _ := newTestLimiter(Config{Capacity: 100})
	first := netip.MustParsePrefix("10.0.0.1/32")
	for range 10 {
		l.Fail(first)
	}
	for i := range 1000 {
		l.Fail(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 32))
		if l.Len() > 100 {
			t.Fatalf("%d addresses kept, capacity 100", l.Len())
		}
	}
	if _, blocked := l.Blocked(first); blocked {
		t.Fatal("the least recently failing address was not the one forgotten")
	}
}

func TestClient(t *testing.T) {
	l, _ := newTestLimiter(Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	for _, c := range []struct {
		remote, xff, want string
	}{
		{"192.0.2.1:4000", "", "192.0.2.1/32"},
		// An untrusted peer's X-Forwarded-For is not believed.
		{"192.0.2.1:4000", "198.51.100.9", "192.0.2.1/32"},
		{"10.1.2.3:4000", "198.51.100.9", "198.51.100.9/32"},
		// The nearest untrusted hop, not what the client wrote first.
		{"10.1.2.3:4000", "1.1.1.1, 198.51.100.9, 10.9.9.9", "198.51.100.9/32"},
		{"10.1.2.3:4000", "garbage, 198.51.100.9", "198.51.100.9/32"},
		{"10.1.2.3:4000", "garbage", "10.1.2.3/32"},
		{"10.1.2.3:4000", "", "10.1.2.3/32"},
		// IPv6: one /64, mapped IPv4 unmapped, zones dropped.
		{"[2001:db8:1:2:3:4:5:6]:4000", "", "2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.1]:4000", "", "192.0.2.1/32"},
		{"10.1.2.3:4000", "[2001:db8::1]:99", "2001:db8::/64"},
		{"[fe80::1%eth0]:4000", "", "fe80::/64"},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := l.Client(r); got.String() != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: client %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
	// Two addresses of one /64 share a count.
	a := netip.MustParsePrefix("2001:db8:1:2::/64")
	for range 10 {
		l.Fail(a)
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "[2001:db8:1:2:ffff::1]:1"
	if _, blocked := l.Blocked(l.Client(r)); !blocked {
		t.Fatal("another address of the same /64 is not blocked")
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Millisecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", 50 * time.Second: "50"} {
		if got := RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	l, _ := newTestLimiter(Config{Capacity: 50})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				a := netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, byte(g), byte(i % 60)}), 32)
				l.Fail(a)
				l.Blocked(a)
			}
		}()
	}
	wg.Wait()
	if l.Len() > 50 {
		t.Fatalf("%d addresses kept, capacity 50", l.Len())
	}
}
