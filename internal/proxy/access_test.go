package proxy

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestPrefixSetContains: the merged-range lookup answers as a scan of
// netip.Prefix.Contains over the same prefixes, for IPv4, IPv6, mapped
// addresses, nested, adjacent and whole-space prefixes.
func TestPrefixSetContains(t *testing.T) {
	list := []string{"10.0.0.0/8", "10.1.0.0/16", "192.0.2.0/25", "192.0.2.128/25", "203.0.113.7/32",
		"2001:db8::/32", "2001:db8:1::/48", "fe80::1/128", "::/1"}
	var pfs []netip.Prefix
	for _, s := range list {
		pfs = append(pfs, netip.MustParsePrefix(s))
	}
	set := NewPrefixSet(pfs)
	scan := func(a netip.Addr) bool {
		a = a.Unmap()
		for _, p := range pfs {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	probes := []string{"10.0.0.0", "10.255.255.255", "11.0.0.0", "9.255.255.255", "192.0.2.0", "192.0.2.255", "192.0.3.0",
		"203.0.113.7", "203.0.113.8", "203.0.113.6", "::ffff:10.2.3.4", "::ffff:11.2.3.4", "2001:db8::1", "2001:db9::",
		"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "fe80::1", "fe80::2", "::", "7fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "8000::", "0.0.0.0", "255.255.255.255"}
	for _, s := range probes {
		a := netip.MustParseAddr(s)
		if got, want := set.Contains(a), scan(a); got != want {
			t.Errorf("Contains(%s) = %v, want %v", s, got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var a netip.Addr
		if r.IntN(2) == 0 {
			a = netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		} else {
			var b [16]byte
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			if r.IntN(2) == 0 {
				b[0], b[1], b[2], b[3] = 0x20, 0x01, 0x0d, 0xb8
			}
			a = netip.AddrFrom16(b)
		}
		if got, want := set.Contains(a), scan(a); got != want {
			t.Fatalf("Contains(%s) = %v, want %v", a, got, want)
		}
	}
	// The ranges were merged: 192.0.2.0/25 and /25 are one, 10.1/16 is in 10/8.
	if len(set.v4) != 3 {
		t.Errorf("IPv4 ranges %v, want 3 after merging", set.v4)
	}
	all := NewPrefixSet([]netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")})
	for _, s := range []string{"0.0.0.0", "255.255.255.255", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		if !all.Contains(netip.MustParseAddr(s)) {
			t.Errorf("the whole space does not contain %s", s)
		}
	}
	var empty PrefixSet
	if empty.Contains(netip.MustParseAddr("10.0.0.1")) || !empty.Empty() {
		t.Error("the empty set contains an address")
	}
}

// TestAccessPermits: deny wins over allow; an empty allow allows all; a
// client that is not an IP address is refused.
func TestAccessPermits(t *testing.T) {
	p := netip.MustParsePrefix
	a := NewAccess([]netip.Prefix{p("10.0.0.0/8")}, []netip.Prefix{p("10.9.0.0/16")})
	for client, want := range map[string]bool{"10.1.2.3:80": true, "10.9.1.1:80": false, "192.0.2.1:80": false,
		"10.1.2.3": true, "[::ffff:10.1.2.3]:5": true, "@": false, "": false} {
		if got := a.permitsClient(client); got != want {
			t.Errorf("allow 10/8 deny 10.9/16: %q permitted %v, want %v", client, got, want)
		}
	}
	d := NewAccess(nil, []netip.Prefix{p("192.0.2.0/24")})
	for client, want := range map[string]bool{"10.1.2.3:80": true, "192.0.2.9:1": false, "[2001:db8::1]:1": true} {
		if got := d.permitsClient(client); got != want {
			t.Errorf("deny 192.0.2/24: %q permitted %v, want %v", client, got, want)
		}
	}
}

// TestAccessAllocatesNothing: the per-request check allocates nothing.
func TestAccessAllocatesNothing(t *testing.T) {
	var pfs []netip.Prefix
	for i := range 1000 {
		pfs = append(pfs, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24))
	}
	pfs = append(pfs, netip.MustParsePrefix("2001:db8::/32"))
	a := NewAccess(pfs, []netip.Prefix{netip.MustParsePrefix("10.0.5.0/24")})
	if n := testing.AllocsPerRun(1000, func() {
		a.permitsClient("10.3.2.1:4567")
		a.permitsClient("[2001:db8::7]:80")
		a.permitsClient("10.0.5.1")
	}); n != 0 {
		t.Fatalf("%v allocations per check, want 0", n)
	}
}

func BenchmarkAccessPermits(b *testing.B) {
	var pfs []netip.Prefix
	for i := range 1000 {
		pfs = append(pfs, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24))
	}
	a := NewAccess(pfs, nil)
	b.ReportAllocs()
	for b.Loop() {
		a.permitsClient("10.3.2.1:4567")
	}
}
