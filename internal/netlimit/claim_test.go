package netlimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"
)

// TestClaimDefersPerIP: with DeferPerIP, Accept takes no per-address slot;
// Claim counts the address it is given (a PROXY header's client), refuses
// past the cap with 429 connection_limit, and Close gives the slot back.
func TestClaimDefersPerIP(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	l := LimitPerIP(inner, 0, 1, func() { refused++ })
	l.DeferPerIP()
	defer l.Close()
	accept := func() (client, server net.Conn) {
		t.Helper()
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		s, err := l.Accept() // all from 127.0.0.1: deferred, none refused here
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return c, s
	}
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	_, s1 := accept()
	c2, s2 := accept()
	_, s3 := accept()
	if !Claim(s1, a) {
		t.Fatal("first claim of 192.0.2.1 refused")
	}
	io.WriteString(c2, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if Claim(s2, a) {
		t.Fatal("second claim of 192.0.2.1 allowed with a cap of 1")
	}
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("refused connection: %v %v, want 429", resp, err)
	}
	if !Claim(s3, netip.AddrFrom16(b.As16())) { // 4-in-6 counts as IPv4
		t.Fatal("claim of 192.0.2.2 refused")
	}
	if refused != 1 {
		t.Fatalf("onRefuse called %d times, want 1", refused)
	}
	s1.Close()
	_, s4 := accept()
	if !Claim(s4, a) {
		t.Fatal("192.0.2.1's slot not given back on Close")
	}
	if l.Open() != 2 { // s3 and s4; s2 closed by its refusal, s1 by the test
		t.Fatalf("open %d, want 2", l.Open())
	}
}
