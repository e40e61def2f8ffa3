package gateway

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The real client address on a real levee (issue 24 item 6): PROXY
// protocol v1 and v2 headers from a trusted peer set the client that
// per-address limits key on; an untrusted peer's connection is closed; a
// spoofed X-Forwarded-For from an untrusted peer reaches neither a limit
// key nor the upstream.

// xffBackend answers with the X-Forwarded-For and Forwarded it received.
func xffBackend(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "xff=%s|fwd=%s", strings.Join(r.Header.Values("X-Forwarded-For"), ";"), strings.Join(r.Header.Values("Forwarded"), ";"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// rawConn dials levee's data port and sends preamble (a PROXY header or
// nothing) first; each request on it is sent with request.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, h *harness, preamble []byte) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", h.g.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if len(preamble) > 0 {
		if _, err := c.Write(preamble); err != nil {
			t.Fatal(err)
		}
	}
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// request sends a GET of path with extra header lines and returns the
// status and body.
func (rc *rawConn) request(path string, headers ...string) (int, string) {
	rc.t.Helper()
	req := "GET " + path + " HTTP/1.1\r\nHost: levee.test\r\n"
	for _, hl := range headers {
		req += hl + "\r\n"
	}
	if _, err := io.WriteString(rc.c, req+"\r\n"); err != nil {
		rc.t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		rc.t.Fatalf("GET %s: %v", path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

func proxyV1(client string, port int) []byte {
	return []byte(fmt.Sprintf("PROXY TCP4 %s 127.0.0.1 %d 80\r\n", client, port))
}

// proxyV2 is a version 2 TCP header from client (IPv4 or IPv6) with a TLV.
func proxyV2(client netip.AddrPort) []byte {
	b := []byte("\r\n\r\n\x00\r\nQUIT\n")
	var addrs []byte
	if client.Addr().Is4() {
		b = append(b, 0x21, 0x11)
		s, d := client.Addr().As4(), [4]byte{127, 0, 0, 1}
		addrs = append(append(addrs, s[:]...), d[:]...)
	} else {
		b = append(b, 0x21, 0x21)
		s, d := client.Addr().As16(), netip.IPv6Loopback().As16()
		addrs = append(append(addrs, s[:]...), d[:]...)
	}
	addrs = binary.BigEndian.AppendUint16(addrs, client.Port())
	addrs = binary.BigEndian.AppendUint16(addrs, 80)
	addrs = append(addrs, 0x05, 0x00, 0x03, 'i', 'd', '1') // PP2_TYPE_UNIQUE_ID
	b = binary.BigEndian.AppendUint16(b, uint16(len(addrs)))
	return append(b, addrs...)
}

// TestProxyProtocolSetsClientAddress: two clients behind one TCP peer
// (127.0.0.1, trusted), one over PROXY v1 and one over v2: each has its own
// per-address rate limit (one is limited, the other not), its own
// max_connections_per_ip count, its own X-Forwarded-For upstream and its
// own access log client.
func TestProxyProtocolSetsClientAddress(t *testing.T) {
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
server:
  max_connections_per_ip: 1
  proxy_protocol: {trusted: [127.0.0.0/8]}
upstreams:
  up: {endpoints: [{address: %s}]}
routes:
  - {name: open, match: {path_prefix: /}, upstream: up, anonymous_limits: {rate: 0.001, burst: 2}}
`, hostPort(xffBackend(t))))

	a := dialRaw(t, h, proxyV1("192.0.2.1", 40001))
	for i := range 2 {
		if st, body := a.request("/a", "X-Forwarded-For: 6.6.6.6", fmt.Sprintf("X-Request-Id: a-%d", i)); st != 200 || body != "xff=192.0.2.1|fwd=" {
			t.Fatalf("client A request %d: %d %q, want 200 with X-Forwarded-For 192.0.2.1 alone", i, st, body)
		}
	}
	if st, body := a.request("/a"); st != http.StatusTooManyRequests || !strings.Contains(body, `"rate_limited"`) {
		t.Fatalf("client A's third request: %d %q, want 429 rate_limited", st, body)
	}
	// Client B, another address behind the same peer, over v2: its own
	// bucket, its own connection slot.
	b := dialRaw(t, h, proxyV2(netip.MustParseAddrPort("[2001:db8::b]:40002")))
	if st, body := b.request("/b", "X-Request-Id: b-0"); st != 200 || body != "xff=2001:db8::b|fwd=" {
		t.Fatalf("client B: %d %q, want 200 with X-Forwarded-For 2001:db8::b", st, body)
	}
	// max_connections_per_ip counts the header's client: A's second
	// connection is over it, C's first is not.
	a2 := dialRaw(t, h, proxyV1("192.0.2.1", 40003))
	if st, body := a2.request("/a"); st != http.StatusTooManyRequests || !strings.Contains(body, `"connection_limit"`) {
		t.Fatalf("client A's second connection: %d %q, want 429 connection_limit", st, body)
	}
	c := dialRaw(t, h, proxyV1("192.0.2.3", 40004))
	if st, _ := c.request("/c"); st != 200 {
		t.Fatalf("client C: %d, want 200", st)
	}
	lines := waitLines(t, h, "a-0", "b-0")
	if got := lines["a-0"]["client"]; got != "192.0.2.1:40001" {
		t.Errorf("access log client of A %q, want 192.0.2.1:40001", got)
	}
	if got := lines["b-0"]["client"]; got != "[2001:db8::b]:40002" {
		t.Errorf("access log client of B %q, want [2001:db8::b]:40002", got)
	}
	if got := h.metric(`levee_proxy_protocol_headers_total{version="v1"}`); got != 3 {
		t.Errorf("v1 headers counted %v, want 3", got)
	}
	if got := h.metric(`levee_proxy_protocol_headers_total{version="v2"}`); got != 1 {
		t.Errorf("v2 headers counted %v, want 1", got)
	}
	// A connection without a header is refused, unanswered, and counted.
	plain := dialRaw(t, h, nil)
	io.WriteString(plain.c, "GET / HTTP/1.1\r\nHost: levee.test\r\n\r\n")
	if got, _ := io.ReadAll(plain.c); len(got) != 0 {
		t.Fatalf("a connection without a header was answered %q", got)
	}
	if got := h.metric(`levee_proxy_protocol_refused_total{reason="missing"}`); got != 1 {
		t.Errorf("missing headers counted %v, want 1", got)
	}
}

// TestProxyProtocolUntrustedPeer: a peer outside proxy_protocol.trusted
// is closed at once, with or without a header, never answered.
func TestProxyProtocolUntrustedPeer(t *testing.T) {
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
server:
  proxy_protocol: {trusted: [10.0.0.0/8]}
upstreams:
  up: {endpoints: [{address: %s}]}
routes:
  - {name: open, match: {path_prefix: /}, upstream: up}
`, hostPort(xffBackend(t))))
	for _, pre := range [][]byte{proxyV1("192.0.2.1", 1), proxyV2(netip.MustParseAddrPort("192.0.2.1:1")), nil} {
		rc := dialRaw(t, h, pre)
		io.WriteString(rc.c, "GET / HTTP/1.1\r\nHost: levee.test\r\n\r\n")
		if got, _ := io.ReadAll(rc.c); len(got) != 0 {
			t.Fatalf("untrusted peer answered %q", got)
		}
	}
	if got := h.metric(`levee_proxy_protocol_refused_total{reason="untrusted"}`); got != 3 {
		t.Errorf("untrusted refusals counted %v, want 3", got)
	}
}

// TestSpoofedForwardedFor: from an untrusted peer a client's
// X-Forwarded-For and Forwarded are ignored for the limit key and never
// reach the upstream; from a trusted peer the right-most untrusted
// address is the client, each with its own limit.
func TestSpoofedForwardedFor(t *testing.T) {
	up := hostPort(xffBackend(t))
	conf := func(trusted string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
server:
  trusted_proxies: [%s]
upstreams:
  up: {endpoints: [{address: %s}]}
routes:
  - {name: open, match: {path_prefix: /}, upstream: up, anonymous_limits: {rate: 0.001, burst: 2}}
`, trusted, up)
	}
	t.Run("untrusted peer", func(t *testing.T) {
		h := start(t, conf("10.0.0.0/8"))
		rc := dialRaw(t, h, nil)
		for i := range 2 {
			spoof := fmt.Sprintf("203.0.113.%d", i+1)
			st, body := rc.request("/", "X-Forwarded-For: "+spoof, "Forwarded: for="+spoof)
			if st != 200 || body != "xff=127.0.0.1|fwd=" {
				t.Fatalf("request %d: %d %q, want 200 and only the peer upstream", i, st, body)
			}
		}
		// A third spoofed address does not buy a fresh bucket: the key is
		// the peer's.
		if st, _ := rc.request("/", "X-Forwarded-For: 203.0.113.99"); st != http.StatusTooManyRequests {
			t.Fatalf("third request with a new spoofed address: %d, want 429", st)
		}
	})
	t.Run("trusted peer", func(t *testing.T) {
		h := start(t, conf("127.0.0.1"))
		rc := dialRaw(t, h, nil)
		for i := range 2 {
			st, body := rc.request("/", "X-Forwarded-For: 6.6.6.6, 203.0.113.1")
			if st != 200 || body != "xff=203.0.113.1, 127.0.0.1|fwd=" {
				t.Fatalf("client 1 request %d: %d %q, want the chain from 203.0.113.1 to the peer", i, st, body)
			}
		}
		if st, _ := rc.request("/", "X-Forwarded-For: 203.0.113.1"); st != http.StatusTooManyRequests {
			t.Fatalf("client 1's third request: %d, want 429", st)
		}
		if st, body := rc.request("/", "X-Forwarded-For: 203.0.113.2"); st != 200 || body != "xff=203.0.113.2, 127.0.0.1|fwd=" {
			t.Fatalf("client 2 through the same peer: %d %q, want 200, its own bucket", st, body)
		}
	})
}
