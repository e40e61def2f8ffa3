package proxy

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// TestClientAddressWalk is the trusted chain walking table: which address
// is the client and what X-Forwarded-For goes upstream, for each peer and
// header.
func TestClientAddressWalk(t *testing.T) {
	tp := &TrustedProxies{Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}}
	fw := &TrustedProxies{Prefixes: tp.Prefixes, Forwarded: true}
	long := strings.Repeat("10.9.9.9, ", 40) + "10.0.0.2" // 41 trusted hops
	cases := []struct {
		name, peer string
		tp         *TrustedProxies
		header     []string // X-Forwarded-For (Forwarded with fw)
		client     string
		xff        string
	}{
		{"no trusted proxies", "10.0.0.1:5000", nil, []string{"203.0.113.9"}, "10.0.0.1:5000", ""},
		{"untrusted peer: header ignored", "198.51.100.7:5000", tp, []string{"203.0.113.9"}, "198.51.100.7:5000", ""},
		{"trusted peer, no header", "10.0.0.1:5000", tp, nil, "10.0.0.1:5000", "10.0.0.1"},
		{"one hop", "10.0.0.1:5000", tp, []string{"203.0.113.9"}, "203.0.113.9", "203.0.113.9, 10.0.0.1"},
		{"spoofed left part dropped", "10.0.0.1:5000", tp, []string{"6.6.6.6, 203.0.113.9, 10.0.0.3"}, "203.0.113.9", "203.0.113.9, 10.0.0.3, 10.0.0.1"},
		{"several header lines", "10.0.0.1:5000", tp, []string{"6.6.6.6", "203.0.113.9", "10.0.0.3"}, "203.0.113.9", "203.0.113.9, 10.0.0.3, 10.0.0.1"},
		{"all trusted: the left-most", "10.0.0.1:5000", tp, []string{"10.0.0.5, 10.0.0.3"}, "10.0.0.5", "10.0.0.5, 10.0.0.3, 10.0.0.1"},
		{"malformed stops at the trusted hop", "10.0.0.1:5000", tp, []string{"203.0.113.9, bogus, 10.0.0.3"}, "10.0.0.3", "10.0.0.3, 10.0.0.1"},
		{"malformed first: the peer", "10.0.0.1:5000", tp, []string{"203.0.113.9, 1.2.3"}, "10.0.0.1:5000", "10.0.0.1"},
		{"empty entry", "10.0.0.1:5000", tp, []string{"203.0.113.9,,10.0.0.3"}, "10.0.0.3", "10.0.0.3, 10.0.0.1"},
		{"with ports and spaces", "10.0.0.1:5000", tp, []string{" 203.0.113.9:4711 ,\t10.0.0.3 "}, "203.0.113.9", "203.0.113.9, 10.0.0.3, 10.0.0.1"},
		{"IPv6", "[2001:db8:ffff::1]:443", tp, []string{"2001:db8::77, [2001:db8:ffff::2]:80"}, "2001:db8::77", "2001:db8::77, 2001:db8:ffff::2, 2001:db8:ffff::1"},
		{"4-in-6 peer and hop", "[::ffff:10.0.0.1]:5000", tp, []string{"::ffff:203.0.113.9"}, "203.0.113.9", "203.0.113.9, 10.0.0.1"},
		{"zone refused", "10.0.0.1:5000", tp, []string{"fe80::1%eth0"}, "10.0.0.1:5000", "10.0.0.1"},
		{"bounded walk", "10.0.0.1:5000", tp, []string{"203.0.113.9, " + long}, "10.9.9.9", ""},
		{"forwarded", "10.0.0.1:5000", fw, []string{`for=6.6.6.6, for=203.0.113.9;proto=https, For="[2001:db8:ffff::2]:80";by=x`}, "203.0.113.9", "203.0.113.9, 2001:db8:ffff::2, 10.0.0.1"},
		{"forwarded quoted v4 with port", "10.0.0.1:5000", fw, []string{`for="203.0.113.9:1234"`}, "203.0.113.9", "203.0.113.9, 10.0.0.1"},
		{"forwarded unquoted v6 refused", "10.0.0.1:5000", fw, []string{`for=[2001:db8::1]`}, "10.0.0.1:5000", "10.0.0.1"},
		{"forwarded unknown stops", "10.0.0.1:5000", fw, []string{`for=203.0.113.9, for=unknown, for=10.0.0.4`}, "10.0.0.4", "10.0.0.4, 10.0.0.1"},
		{"forwarded obfuscated stops", "10.0.0.1:5000", fw, []string{`for=_hidden`}, "10.0.0.1:5000", "10.0.0.1"},
		{"forwarded element without for", "10.0.0.1:5000", fw, []string{`for=203.0.113.9, by=10.0.0.4`}, "10.0.0.1:5000", "10.0.0.1"},
		{"forwarded mode ignores XFF", "10.0.0.1:5000", fw, nil, "10.0.0.1:5000", "10.0.0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.peer
			name := "X-Forwarded-For"
			if tc.tp != nil && tc.tp.Forwarded {
				name = "Forwarded"
				r.Header["X-Forwarded-For"] = []string{"6.6.6.6"}
			}
			if tc.header != nil {
				r.Header[name] = tc.header
			}
			client, xff := clientAddress(r, tc.tp)
			if client != tc.client {
				t.Errorf("client %q, want %q", client, tc.client)
			}
			if tc.name == "bounded walk" {
				if n := strings.Count(xff, ","); n != maxForwardedHops {
					t.Errorf("X-Forwarded-For of %d hops, want %d and the peer: %q", n, maxForwardedHops, xff)
				}
			} else if xff != tc.xff {
				t.Errorf("X-Forwarded-For %q, want %q", xff, tc.xff)
			}
			if a, ok := clientIP(client); !ok || !a.IsValid() {
				t.Errorf("clientIP(%q) does not parse", client)
			}
		})
	}
}

// TestClientAddressNoAllocWithoutTrust: with no trusted proxies, the
// client address costs nothing.
func TestClientAddressNoAllocWithoutTrust(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header["X-Forwarded-For"] = []string{"203.0.113.9"}
	if n := testing.AllocsPerRun(100, func() {
		c, _ := clientAddress(r, nil)
		_, _ = clientIP(c)
		_ = clientHost(c)
	}); n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}

func FuzzClientAddress(f *testing.F) {
	f.Add("10.0.0.1:5000", "203.0.113.9, 10.0.0.3", false)
	f.Add("10.0.0.1:5000", `for=203.0.113.9;proto=https, for="[2001:db8::1]:80"`, true)
	f.Add("[2001:db8:ffff::1]:443", "2001:db8::77", false)
	tp := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	f.Fuzz(func(t *testing.T, peer, header string, forwarded bool) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = peer
		name := "X-Forwarded-For"
		if forwarded {
			name = "Forwarded"
		}
		r.Header[name] = strings.Split(header, "\n")
		p := &TrustedProxies{Prefixes: tp, Forwarded: forwarded}
		client, xff := clientAddress(r, p)
		pa, perr := netip.ParseAddrPort(peer)
		trusted := perr == nil && p.trusts(pa.Addr().Unmap())
		if !trusted {
			if client != peer || xff != "" {
				t.Fatalf("untrusted peer %q: client %q, xff %q", peer, client, xff)
			}
			return
		}
		if _, ok := clientIP(client); !ok {
			t.Fatalf("client %q does not parse", client)
		}
		hops := strings.Split(xff, ", ")
		if len(hops) > maxForwardedHops+1 {
			t.Fatalf("%d hops sent", len(hops))
		}
		for i, h := range hops {
			a, err := netip.ParseAddr(h)
			if err != nil {
				t.Fatalf("hop %q of %q is not an address", h, xff)
			}
			if i > 0 && !p.trusts(a) {
				t.Fatalf("untrusted hop %q right of the client in %q", h, xff)
			}
		}
		if hops[len(hops)-1] != pa.Addr().Unmap().String() {
			t.Fatalf("xff %q does not end with the peer", xff)
		}
	})
}

// BenchmarkClientAddress: the cost of the client address per request,
// without trusted proxies (the default) and through a trusted proxy with a
// three-hop X-Forwarded-For.
func BenchmarkClientAddress(b *testing.B) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:5000"
	r.Header["X-Forwarded-For"] = []string{"6.6.6.6, 203.0.113.9, 10.0.0.3"}
	tp := &TrustedProxies{Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	for _, bc := range []struct {
		name string
		tp   *TrustedProxies
	}{{"untrusted", nil}, {"trusted", tp}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				clientAddress(r, bc.tp)
			}
		})
	}
}
