package notify

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

func TestPublicAddr(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr   string
		public bool
	}{
		{"93.184.216.34", true},
		{"8.8.8.8", true},
		{"2606:4700:4700::1111", true},
		{"2001:4860:4860::8888", true},
		{"::ffff:8.8.8.8", true}, // mapped, judged as 8.8.8.8
		{"::8.8.8.8", true},      // IPv4-compatible, judged as 8.8.8.8

		{"127.0.0.1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false},
		{"100.64.0.1", false},
		{"0.0.0.0", false},
		{"192.0.0.9", false},
		{"192.31.196.1", false},
		{"192.88.99.1", false},
		{"198.18.0.1", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"::", false},
		{"::1", false},
		{"fe80::1", false},
		{"fd00:ec2::254", false},
		{"fc00::1", false},
		{"fec0::1", false},
		{"ff02::1", false},
		{"2001:db8::1", false},
		{"3fff::1", false},
		{"5f00::1", false},
		{"100::1", false},

		// Zones: netip.Prefix.Contains is false for any of them.
		{"::1%lo", false},
		{"fe80::1%eth0", false},
		{"2606:4700:4700::1111%eth0", false},
		// Embedded private IPv4 addresses.
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::7f00:1", false},                             // IPv4-compatible 127.0.0.1
		{"::a9fe:a9fe", false},                          // IPv4-compatible 169.254.169.254
		{"2002:7f00:1::", false},                        // 6to4 of 127.0.0.1
		{"2002:0a00:0001::1", false},                    // 6to4 of 10.0.0.1
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", false}, // Teredo, client 127.0.0.1
		{"64:ff9b::7f00:1", false},                      // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", false},                   // NAT64 of 169.254.169.254
		{"64:ff9b:1:7f00:0:100::", false},               // local-use NAT64
	} {
		a := netip.MustParseAddr(c.addr)
		if got := PublicAddr(a); got != c.public {
			t.Errorf("PublicAddr(%s) = %v, want %v", c.addr, got, c.public)
		}
	}
	if PublicAddr(netip.Addr{}) {
		t.Error("the zero Addr is public")
	}
}

// embeddings are the IPv6 forms that carry an IPv4 address: the dialer, a
// relay or a translator may end up at the IPv4 address itself.
func embeddings(v4 [4]byte, extra uint64) []netip.Addr {
	var out []netip.Addr
	put := func(prefix [16]byte, at int) {
		copy(prefix[at:at+4], v4[:])
		out = append(out, netip.AddrFrom16(prefix))
	}
	put([16]byte{10: 0xff, 11: 0xff}, 12)        // IPv4-mapped
	put([16]byte{}, 12)                          // IPv4-compatible
	put([16]byte{8: 0xff, 9: 0xff}, 12)          // IPv4-translated (SIIT)
	put([16]byte{0: 0x20, 1: 0x02}, 2)           // 6to4
	put([16]byte{1: 0x64, 2: 0xff, 3: 0x9b}, 12) // NAT64
	local := [16]byte{1: 0x64, 2: 0xff, 3: 0x9b, 5: 0x01}
	local[6], local[7], local[9], local[10] = v4[0], v4[1], v4[2], v4[3] // 64:ff9b:1::/48, u-octet skipped
	out = append(out, netip.AddrFrom16(local))
	teredo := [16]byte{0: 0x20, 1: 0x01}
	binary.BigEndian.PutUint64(teredo[4:12], extra)
	for i, b := range v4 {
		teredo[12+i] = ^b // the client address is stored obfuscated
	}
	out = append(out, netip.AddrFrom16(teredo))
	tail := [16]byte{0: 0x20, 1: 0x02}
	copy(tail[2:6], v4[:])
	binary.BigEndian.PutUint64(tail[8:], extra)
	return append(out, netip.AddrFrom16(tail)) // 6to4 with a host part
}

func FuzzAddressPolicy(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "10.0.0.1", "169.254.169.254", "192.168.0.1", "8.8.8.8", "100.64.0.1", "0.0.0.0"} {
		a := netip.MustParseAddr(s).As4()
		f.Add(a[:], uint64(0), "eth0")
	}
	f.Add([]byte(netip.MustParseAddr("fe80::1").AsSlice()), uint64(7), "lo")
	f.Fuzz(func(t *testing.T, raw []byte, extra uint64, zone string) {
		a, ok := netip.AddrFromSlice(raw)
		if !ok {
			return
		}
		if zone != "" && a.Is6() && PublicAddr(a.WithZone(zone)) {
			t.Fatalf("%s is public with zone %q", a, zone)
		}
		if PublicAddr(a) && !PublicAddr(a.Unmap()) {
			t.Fatalf("%s is public but %s is not", a, a.Unmap())
		}
		if !a.Is4() || PublicAddr(a) {
			return
		}
		for _, e := range embeddings(a.As4(), extra) {
			if PublicAddr(e) {
				t.Fatalf("%s carries the non-public %s and is public", e, a)
			}
			if PublicAddr(e.WithZone("eth0")) {
				t.Fatalf("%s%%eth0 is public", e)
			}
		}
	})
}

// TestCheckURLSameAnswer: a name that does not resolve reads as a refused
// address; only the delivery metrics tell them apart.
func TestCheckURLSameAnswer(t *testing.T) {
	t.Parallel()
	unresolved := Guard{}.CheckURL(t.Context(), "https://no-such-name.invalid/h")
	refusedLit := Guard{}.CheckURL(t.Context(), "https://[::1%25lo]:443/h")
	if !errors.Is(unresolved, ErrAddressRefused) || !errors.Is(refusedLit, ErrAddressRefused) || unresolved.Error() != refusedLit.Error() {
		t.Fatalf("unresolved: %v; refused: %v; want the same ErrAddressRefused", unresolved, refusedLit)
	}
	if !errors.Is(unresolved, errUnresolved) || errors.Is(refusedLit, errUnresolved) {
		t.Fatal("the metrics cannot tell a DNS failure from a refused address")
	}
}
