package config

import (
	"slices"
	"strings"
	"testing"
)

func TestAccessFields(t *testing.T) {
	cfg, err := Parse([]byte(head + "server:\n  access: {allow: [10.0.0.0/8, \"2001:db8::/32\"], deny: [10.1.2.3]}\n" + upstreams +
		"routes:\n  - {name: a, upstream: video, match: {path_prefix: /a}, access: {}}\n" +
		"  - {name: b, upstream: video, match: {path_prefix: /b}, access: {deny: [192.0.2.0/24]}}\n" +
		"  - {name: c, upstream: video, match: {path_prefix: /c}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Server.Access
	if s == nil || !slices.Equal(s.Allow, []string{"10.0.0.0/8", "2001:db8::/32"}) || !slices.Equal(s.Deny, []string{"10.1.2.3/32"}) {
		t.Fatalf("server.access = %+v", s)
	}
	if a := cfg.RouteAccess(&cfg.Routes[0]); a == nil || len(a.Allow)+len(a.Deny) != 0 {
		t.Errorf("route a (access: {}) = %+v, want empty lists replacing the default", a)
	}
	if b := cfg.RouteAccess(&cfg.Routes[1]); b == nil || b.Allow != nil || !slices.Equal(b.Deny, []string{"192.0.2.0/24"}) {
		t.Errorf("route b = %+v", b)
	}
	if c := cfg.RouteAccess(&cfg.Routes[2]); c != s {
		t.Errorf("route c = %+v, want server.access", c)
	}
	if got := s.DenyPrefixes(); len(got) != 1 || got[0].Bits() != 32 {
		t.Errorf("DenyPrefixes = %v", got)
	}
	def, err := Parse([]byte(head + upstreams + routes))
	if err != nil {
		t.Fatal(err)
	}
	if def.Server.Access != nil || def.RouteAccess(&def.Routes[0]) != nil {
		t.Errorf("defaults: %+v", def.Server.Access)
	}
}

func TestAccessRejects(t *testing.T) {
	many := strings.Repeat("10.0.0.1, ", MaxAccessPrefixes+1)
	cases := []struct{ name, server, route, want string }{
		{"host bits", "{access: {allow: [10.0.0.1/8]}}", "", `server.access.allow[0]: has bits set past its length: did you mean "10.0.0.0/8"?`},
		{"not a prefix", "", "access: {deny: [lb.example]}", `routes[0].access.deny[0]: must be a CIDR prefix such as "10.0.0.0/8" or an address, got "lb.example"`},
		{"duplicate", "", "access: {deny: [10.0.0.1, 10.0.0.1/32]}", `routes[0].access.deny[1]: duplicate prefix "10.0.0.1/32"`},
		{"mapped", "", "access: {allow: [\"::ffff:10.0.0.0/104\"]}", `routes[0].access.allow[0]: an IPv4-mapped IPv6 prefix never matches`},
		{"too many", "{access: {deny: [" + many + "]}}", "", `server.access.deny: must list at most 4096 prefixes, got 4097`},
		{"unknown field", "", "access: {allowed: [10.0.0.0/8]}", `routes[0].access.allowed: unknown field`},
		{"not a list", "", "access: {allow: 10.0.0.0/8}", `routes[0].access.allow: must be a sequence`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			y := head
			if tc.server != "" {
				y += "server: " + tc.server + "\n"
			}
			y += upstreams + routes
			if tc.route != "" {
				y += "    " + tc.route + "\n"
			}
			_, err := Parse([]byte(y))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
