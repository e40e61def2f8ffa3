package config

import (
	"slices"
	"strings"
	"testing"
)

func TestRealAddressFields(t *testing.T) {
	cfg, err := Parse([]byte(head + "server:\n  proxy_protocol: {trusted: [10.0.0.0/8, 192.0.2.7, \"2001:db8::/32\"]}\n  trusted_proxies: [172.16.0.0/12, \"::1\"]\n  trusted_proxies_header: forwarded\n" + upstreams + routes))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Server
	if s.ProxyProtocol == nil || !slices.Equal(s.ProxyProtocol.Trusted, []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32"}) {
		t.Errorf("proxy_protocol = %+v", s.ProxyProtocol)
	}
	if !slices.Equal(s.TrustedProxies, []string{"172.16.0.0/12", "::1/128"}) || s.TrustedProxiesHeader != TrustedHeaderForwarded {
		t.Errorf("trusted_proxies = %q, header %q", s.TrustedProxies, s.TrustedProxiesHeader)
	}
	if got := Prefixes(s.TrustedProxies); len(got) != 2 || got[1].Bits() != 128 {
		t.Errorf("Prefixes = %v", got)
	}
	def, err := Parse([]byte(head + upstreams + routes))
	if err != nil {
		t.Fatal(err)
	}
	if def.Server.ProxyProtocol != nil || def.Server.TrustedProxies != nil || def.Server.TrustedProxiesHeader != DefaultTrustedProxiesHeader {
		t.Errorf("defaults: %+v %q %q", def.Server.ProxyProtocol, def.Server.TrustedProxies, def.Server.TrustedProxiesHeader)
	}
}

func TestRealAddressRejects(t *testing.T) {
	many := strings.Repeat("10.0.0.1, ", MaxTrustedPrefixes+1)
	cases := []struct{ name, server, want string }{
		{"not a prefix", "{trusted_proxies: [10.0.0.0/33]}", `server.trusted_proxies[0]: must be a CIDR prefix such as "10.0.0.0/8" or an address, got "10.0.0.0/33"`},
		{"host bits", "{trusted_proxies: [10.0.0.1/8]}", `server.trusted_proxies[0]: has bits set past its length: did you mean "10.0.0.0/8"?`},
		{"duplicate", "{trusted_proxies: [10.0.0.1, 10.0.0.1/32]}", `server.trusted_proxies[1]: duplicate prefix "10.0.0.1/32"`},
		{"mapped", "{trusted_proxies: [\"::ffff:10.0.0.0/104\"]}", `server.trusted_proxies[0]: an IPv4-mapped IPv6 prefix never matches (addresses are compared as IPv4): write "::ffff:10.0.0.0/104" in IPv4 form`},
		{"zone", "{trusted_proxies: [\"fe80::1%eth0\"]}", `server.trusted_proxies[0]: must be a CIDR prefix such as "10.0.0.0/8" or an address, got "fe80::1%eth0"`},
		{"empty list", "{trusted_proxies: []}", `server.trusted_proxies: must list 1 to 64 prefixes, got 0`},
		{"too many", "{trusted_proxies: [" + many + "]}", `server.trusted_proxies: must list 1 to 64 prefixes, got 65`},
		{"not a list", "{trusted_proxies: 10.0.0.0/8}", `server.trusted_proxies: must be a sequence, got "10.0.0.0/8"`},
		{"header", "{trusted_proxies_header: x-real-ip}", `server.trusted_proxies_header: must be one of "x-forwarded-for", "forwarded", got "x-real-ip"`},
		{"pp without trusted", "{proxy_protocol: {}}", `server.proxy_protocol.trusted: required`},
		{"pp bad prefix", "{proxy_protocol: {trusted: [lb.example]}}", `server.proxy_protocol.trusted[0]: must be a CIDR prefix such as "10.0.0.0/8" or an address, got "lb.example"`},
		{"pp unknown field", "{proxy_protocol: {trust: [10.0.0.0/8]}}", `server.proxy_protocol.trust: unknown field`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(head + "server: " + tc.server + "\n" + upstreams + routes))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
