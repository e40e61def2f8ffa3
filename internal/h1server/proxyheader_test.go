package h1server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/proxyproto"
	"github.com/levee-gw/levee/internal/testkit"
)

// Raw-socket tests of the PROXY protocol on the listener
// (Options.ProxyProtocol): the header's source becomes the requests'
// RemoteAddr in the loop, after a handoff to net/http and over TLS (HTTP/1.1
// and HTTP/2); refusals close the connection unanswered and are counted.

// remoteEcho answers with the request's RemoteAddr.
var remoteEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	io.WriteString(w, r.RemoteAddr)
})

func withProxyProtocol(trusted string, claim func(net.Conn, netip.Addr) bool) func(*Options) {
	return func(o *Options) {
		o.ProxyProtocol = &ProxyProtocol{Trusted: []netip.Prefix{netip.MustParsePrefix(trusted)}, Claim: claim}
	}
}

func ppV2(verCmd, fam byte, addrs []byte, tlvs ...[]byte) []byte {
	body := append([]byte(nil), addrs...)
	for _, t := range tlvs {
		body = append(body, t...)
	}
	b := append([]byte("\r\n\r\n\x00\r\nQUIT\n"), verCmd, fam, 0, 0)
	binary.BigEndian.PutUint16(b[14:], uint16(len(body)))
	return append(b, body...)
}

func ppV2TCP6(src, dst netip.AddrPort) []byte {
	s, d := src.Addr().As16(), dst.Addr().As16()
	a := append(s[:], d[:]...)
	a = binary.BigEndian.AppendUint16(a, src.Port())
	a = binary.BigEndian.AppendUint16(a, dst.Port())
	return ppV2(0x21, 0x21, a, []byte{0x01, 0x00, 0x02, 'h', '2'}, []byte{0xEA, 0x00, 0x03, 'v', 'p', 'c'})
}

func TestProxyProtocolSetsRemoteAddr(t *testing.T) {
	var mu sync.Mutex
	var claimed []string
	claim := func(nc net.Conn, client netip.Addr) bool {
		mu.Lock()
		defer mu.Unlock()
		claimed = append(claimed, client.String())
		return true
	}
	ts := startServer(t, remoteEcho, withProxyProtocol("127.0.0.0/8", claim))
	get := "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	chunked := "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
	cases := []struct {
		name, header, request, want string
	}{
		{"v1 tcp4", "PROXY TCP4 192.0.2.7 198.51.100.1 56325 443\r\n", get, "192.0.2.7:56325"},
		{"v1 tcp6", "PROXY TCP6 2001:db8::7 2001:db8::1 12345 80\r\n", get, "[2001:db8::7]:12345"},
		{"v2 tcp6 with TLVs", string(ppV2TCP6(netip.MustParseAddrPort("[2001:db8::9]:4000"), netip.MustParseAddrPort("[2001:db8::1]:80"))), get, "[2001:db8::9]:4000"},
		{"v2 tcp4", string(ppV2(0x21, 0x11, []byte{203, 0, 113, 5, 10, 0, 0, 1, 0x1f, 0x90, 0, 80})), get, "203.0.113.5:8080"},
		{"v1 handed off (chunked)", "PROXY TCP4 192.0.2.8 198.51.100.1 1000 443\r\n", chunked, "192.0.2.8:1000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, br := ts.dial()
			// The header and the request in one write: the request's bytes
			// after the header must reach the parser whole.
			if _, err := io.WriteString(c, tc.header+tc.request); err != nil {
				t.Fatal(err)
			}
			resp, body := readResponse(t, br, "GET")
			if resp.StatusCode != 200 || body != tc.want {
				t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, body, tc.want)
			}
			if tc.request == get {
				// Keep-alive: the second request has the same client.
				io.WriteString(c, get)
				if _, body := readResponse(t, br, "GET"); body != tc.want {
					t.Fatalf("second request: %q, want %q", body, tc.want)
				}
			}
		})
	}
	t.Run("v2 local", func(t *testing.T) {
		c, br := ts.dial()
		io.WriteString(c, string(ppV2(0x20, 0x00, nil))+get)
		if _, body := readResponse(t, br, "GET"); body != c.LocalAddr().String() {
			t.Fatalf("LOCAL: %q, want the peer %q", body, c.LocalAddr())
		}
	})
	t.Run("h2c handed off", func(t *testing.T) {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: p, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				_, err = io.WriteString(nc, "PROXY TCP6 2001:db8::c 2001:db8::1 7000 80\r\n")
			}
			return nc, err
		}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + ts.addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || string(b) != "[2001:db8::c]:7000" {
			t.Fatalf("%s %q, want HTTP/2 from [2001:db8::c]:7000", resp.Proto, b)
		}
	})
	st := ts.srv.Stats()
	if st.ProxyProtocolHeaders["v1"] != 4 || st.ProxyProtocolHeaders["v2"] != 3 {
		t.Errorf("headers counted %v, want v1 4, v2 3", st.ProxyProtocolHeaders)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "192.0.2.7 2001:db8::7 2001:db8::9 203.0.113.5 192.0.2.8 127.0.0.1 2001:db8::c"
	if got := strings.Join(claimed, " "); got != want {
		t.Errorf("claimed %q, want %q", got, want)
	}
}

// TestProxyProtocolOverTLS: the header comes before the TLS handshake; the
// client is the header's over HTTP/1.1 (the loop) and HTTP/2 (net/http).
func TestProxyProtocolOverTLS(t *testing.T) {
	ts := tlsServer(t, remoteEcho, withProxyProtocol("127.0.0.0/8", nil))
	for _, h2 := range []bool{false, true} {
		header := fmt.Sprintf("PROXY TCP4 192.0.2.%d 198.51.100.1 5000 443\r\n", map[bool]int{false: 1, true: 2}[h2])
		tr := &http.Transport{
			ForceAttemptHTTP2: h2,
			DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				if _, err := io.WriteString(nc, header); err != nil {
					nc.Close()
					return nil, err
				}
				protos := []string{"http/1.1"}
				if h2 {
					protos = []string{"h2"}
				}
				tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true, NextProtos: protos})
				if err := tc.HandshakeContext(ctx); err != nil {
					nc.Close()
					return nil, err
				}
				return tc, nil
			},
		}
		cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		resp, err := cl.Get("https://" + ts.addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		want := strings.Fields(header)[2] + ":5000"
		if string(b) != want || resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
			t.Fatalf("h2=%v: %s %q, want %q", h2, resp.Proto, b, want)
		}
	}
}

// TestProxyProtocolRefusals: each refused connection is closed without a
// byte of answer and counted by its reason.
func TestProxyProtocolRefusals(t *testing.T) {
	refuseClaim := func(nc net.Conn, client netip.Addr) bool { return client != netip.MustParseAddr("192.0.2.66") }
	ts := startServer(t, remoteEcho, withProxyProtocol("127.0.0.0/8", refuseClaim), func(o *Options) { o.ReadHeaderTimeout = 300 * time.Millisecond })
	untrusted := startServer(t, remoteEcho, withProxyProtocol("10.0.0.0/8", nil))
	get := "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	cases := []struct {
		name, send, reason string
		srv                *testServer
		closeWrite         bool
	}{
		{"untrusted peer", "PROXY TCP4 192.0.2.7 198.51.100.1 1 2\r\n" + get, proxyproto.ReasonUntrusted, untrusted, false},
		{"no header", get, proxyproto.ReasonMissing, ts, false},
		{"wrong v2 signature", "\r\n\r\n\x00\r\nQUIT\r!\x11\x00\x0c" + get, proxyproto.ReasonMissing, ts, false},
		{"malformed v1", "PROXY TCP4 192.0.2.7 198.51.100.1 01 2\r\n" + get, proxyproto.ReasonMalformed, ts, false},
		{"oversized v1", "PROXY UNKNOWN " + strings.Repeat("x", 120) + "\r\n" + get, proxyproto.ReasonMalformed, ts, false},
		{"v2 udp", string(ppV2(0x21, 0x12, make([]byte, 12))) + get, proxyproto.ReasonUnsupported, ts, false},
		{"truncated v2", string(ppV2(0x21, 0x11, make([]byte, 12))[:20]), proxyproto.ReasonTruncated, ts, true},
		{"stalled v1", "PROXY TCP4 192.0.2.7 ", proxyproto.ReasonTimeout, ts, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.srv.srv.Stats().ProxyProtocolRefused[tc.reason]
			c, _ := tc.srv.dial()
			io.WriteString(c, tc.send)
			if tc.closeWrite {
				c.(*net.TCPConn).CloseWrite()
			}
			b, _ := io.ReadAll(c) // EOF or a reset: the server closed
			if len(b) != 0 {
				t.Fatalf("answered %q, want nothing", b)
			}
			testkit.Eventually(t, 5*time.Second, func() (bool, string) {
				n := tc.srv.srv.Stats().ProxyProtocolRefused[tc.reason]
				return n == before+1, fmt.Sprintf("%s: %d", tc.reason, n)
			})
		})
	}
	t.Run("claim refused", func(t *testing.T) {
		c, _ := ts.dial()
		io.WriteString(c, "PROXY TCP4 192.0.2.66 198.51.100.1 1 2\r\n"+get)
		if b, _ := io.ReadAll(c); len(b) != 0 {
			t.Fatalf("answered %q, want nothing (Claim answers itself)", b)
		}
	})
	if len(proxyproto.Reasons()) != numProxyReasons {
		t.Fatalf("numProxyReasons %d, proxyproto has %d", numProxyReasons, len(proxyproto.Reasons()))
	}
}
