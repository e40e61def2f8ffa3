package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// Address allow and deny lists (issue 26 item 5) on a real levee behind a
// PROXY protocol v2 peer and trusted proxies: the real client address
// decides, deny wins over allow, a route's access replaces server.access,
// and a spoofed X-Forwarded-For from an untrusted peer changes nothing.
// A refused request never reaches the upstream.
func TestAccessLists(t *testing.T) {
	var hits atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(backend.Close)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
server:
  proxy_protocol: {trusted: [127.0.0.0/8]}
  trusted_proxies: [203.0.113.0/24]
  access: {allow: [198.51.100.0/24, "2001:db8:a::/48"], deny: [198.51.100.66]}
upstreams:
  up: {endpoints: [{address: %s}]}
routes:
  - {name: open, match: {path_prefix: /open}, upstream: up, access: {}}
  - {name: narrow, match: {path_prefix: /narrow}, upstream: up, access: {deny: [198.51.100.0/25]}}
  - {name: main, match: {path_prefix: /}, upstream: up}
`, hostPort(backend)))

	cases := []struct {
		name, peer, xff, path string
		want                  int
	}{
		{"allowed", "198.51.100.1:1000", "", "/", 200},
		{"deny wins over allow", "198.51.100.66:1000", "", "/", 403},
		{"not in allow", "192.0.2.1:1000", "", "/", 403},
		{"IPv6 in allow", "[2001:db8:a::5]:1000", "", "/", 200},
		{"IPv6 not in allow", "[2001:db8:b::5]:1000", "", "/", 403},
		{"route access: {} allows all", "192.0.2.1:1000", "", "/open/x", 200},
		{"route deny, server allow replaced", "198.51.100.1:1000", "", "/narrow", 403},
		{"route without allow allows the rest", "192.0.2.1:1000", "", "/narrow", 200},
		{"trusted proxy names an allowed client", "203.0.113.5:1000", "X-Forwarded-For: 198.51.100.7", "/", 200},
		{"trusted proxy names a refused client", "203.0.113.5:1000", "X-Forwarded-For: 192.0.2.9", "/", 403},
		{"trusted proxy names a denied client", "203.0.113.5:1000", "X-Forwarded-For: 198.51.100.7, 198.51.100.66", "/", 403},
		{"spoofed XFF from an untrusted peer", "192.0.2.50:1000", "X-Forwarded-For: 198.51.100.7", "/", 403},
		{"an allowed untrusted peer's XFF ignored", "198.51.100.8:1000", "X-Forwarded-For: 192.0.2.9", "/", 200},
	}
	allowed := 0
	for _, c := range cases {
		rc := dialRaw(t, h, proxyV2(netip.MustParseAddrPort(c.peer)))
		var headers []string
		if c.xff != "" {
			headers = append(headers, c.xff)
		}
		st, body := rc.request(c.path, headers...)
		if st != c.want {
			t.Errorf("%s: %s via %s: %d %q, want %d", c.name, c.path, c.peer, st, body, c.want)
			continue
		}
		if st == 403 && !strings.Contains(body, `"reason":"address_denied"`) {
			t.Errorf("%s: 403 body %q, want reason address_denied", c.name, body)
		}
		if st == 200 {
			allowed++
		}
	}
	if got := hits.Load(); got != int64(allowed) {
		t.Errorf("the upstream got %d requests, want %d (the allowed ones only)", got, allowed)
	}
	if got := h.metric(`levee_refusals_total{reason="address_denied",route="main"}`); got != 6 {
		t.Errorf("address_denied refusals on main counted %v, want 6", got)
	}
}

// TestAccessBeforeAuth: on a route with auth, a refused address gets 403
// address_denied whatever credentials it sends (or none): the list is
// checked first, and an allowed address then meets the auth check.
func TestAccessBeforeAuth(t *testing.T) {
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
server:
  proxy_protocol: {trusted: [127.0.0.0/8]}
upstreams:
  up: {endpoints: [{address: %s}]}
routes:
  - {name: keyed, match: {path_prefix: /}, upstream: up, auth: api_key, access: {deny: [192.0.2.0/24]}}
`, hostPort(xffBackend(t))))
	rc := dialRaw(t, h, proxyV2(netip.MustParseAddrPort("192.0.2.1:1")))
	if st, body := rc.request("/", "Authorization: Bearer nonsense"); st != 403 || !strings.Contains(body, `"address_denied"`) {
		t.Fatalf("denied address: %d %q, want 403 address_denied", st, body)
	}
	rc = dialRaw(t, h, proxyV2(netip.MustParseAddrPort("198.51.100.1:1")))
	if st, body := rc.request("/"); st != 401 || !strings.Contains(body, `"unauthenticated"`) {
		t.Fatalf("allowed address without a key: %d %q, want 401 unauthenticated", st, body)
	}
}
