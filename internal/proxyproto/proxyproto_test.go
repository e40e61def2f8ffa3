package proxyproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// v2 builds a version 2 header: ver_cmd, family, addresses and TLVs.
func v2(verCmd, fam byte, addrs []byte, tlvs ...[]byte) []byte {
	body := append([]byte(nil), addrs...)
	for _, t := range tlvs {
		body = append(body, t...)
	}
	b := append([]byte(nil), sigV2...)
	b = append(b, verCmd, fam, 0, 0)
	binary.BigEndian.PutUint16(b[14:], uint16(len(body)))
	return append(b, body...)
}

func tlv(typ byte, v []byte) []byte {
	b := []byte{typ, 0, 0}
	binary.BigEndian.PutUint16(b[1:], uint16(len(v)))
	return append(b, v...)
}

var (
	tcp4Addrs = []byte{192, 0, 2, 7, 198, 51, 100, 1, 0xdc, 0x05, 0x01, 0xbb} // 192.0.2.7:56325 -> 198.51.100.1:443
	tcp6Addrs = func() []byte {
		src := netip.MustParseAddr("2001:db8::7").As16()
		dst := netip.MustParseAddr("2001:db8::1").As16()
		b := append(src[:], dst[:]...)
		return append(b, 0x30, 0x39, 0x00, 0x50) // 12345 -> 80
	}()
)

func TestParse(t *testing.T) {
	src4 := netip.MustParseAddrPort("192.0.2.7:56325")
	src6 := netip.MustParseAddrPort("[2001:db8::7]:12345")
	cases := []struct {
		name   string
		in     []byte
		want   Header
		reason string
	}{
		{"v1 tcp4", []byte("PROXY TCP4 192.0.2.7 198.51.100.1 56325 443\r\n"), Header{1, Proxy, src4, netip.MustParseAddrPort("198.51.100.1:443")}, ""},
		{"v1 tcp6", []byte("PROXY TCP6 2001:db8::7 2001:db8::1 12345 80\r\n"), Header{1, Proxy, src6, netip.MustParseAddrPort("[2001:db8::1]:80")}, ""},
		{"v1 unknown", []byte("PROXY UNKNOWN\r\n"), Header{Version: 1, Command: Local}, ""},
		{"v1 unknown with addresses", []byte("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"), Header{Version: 1, Command: Local}, ""},
		{"v1 longest", []byte("PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"),
			Header{1, Proxy, netip.MustParseAddrPort("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"), netip.MustParseAddrPort("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535")}, ""},
		{"v1 port 0", []byte("PROXY TCP4 192.0.2.7 198.51.100.1 0 443\r\n"), Header{1, Proxy, netip.MustParseAddrPort("192.0.2.7:0"), netip.MustParseAddrPort("198.51.100.1:443")}, ""},
		{"v1 bare LF", []byte("PROXY TCP4 192.0.2.7 198.51.100.1 56325 443\n"), Header{}, ReasonMalformed},
		{"v1 double space", []byte("PROXY TCP4  192.0.2.7 198.51.100.1 56325 443\r\n"), Header{}, ReasonMalformed},
		{"v1 tcp4 with v6", []byte("PROXY TCP4 2001:db8::7 198.51.100.1 1 2\r\n"), Header{}, ReasonMalformed},
		{"v1 tcp6 with v4", []byte("PROXY TCP6 192.0.2.7 198.51.100.1 1 2\r\n"), Header{}, ReasonMalformed},
		{"v1 leading zero port", []byte("PROXY TCP4 192.0.2.7 198.51.100.1 080 443\r\n"), Header{}, ReasonMalformed},
		{"v1 port over 65535", []byte("PROXY TCP4 192.0.2.7 198.51.100.1 65536 443\r\n"), Header{}, ReasonMalformed},
		{"v1 leading zero address", []byte("PROXY TCP4 192.0.2.07 198.51.100.1 1 443\r\n"), Header{}, ReasonMalformed},
		{"v1 zone", []byte("PROXY TCP6 fe80::1%eth0 2001:db8::1 1 2\r\n"), Header{}, ReasonMalformed},
		{"v1 udp", []byte("PROXY UDP4 192.0.2.7 198.51.100.1 1 2\r\n"), Header{}, ReasonMalformed},
		{"v1 extra field", []byte("PROXY TCP4 192.0.2.7 198.51.100.1 1 2 3\r\n"), Header{}, ReasonMalformed},
		{"v1 oversized", []byte("PROXY UNKNOWN " + strings.Repeat("x", 100) + "\r\n"), Header{}, ReasonMalformed},
		{"v1 truncated", []byte("PROXY TCP4 192.0.2.7"), Header{}, ReasonTruncated},
		{"v1 lower case", []byte("proxy TCP4 192.0.2.7 198.51.100.1 1 2\r\n"), Header{}, ReasonMissing},
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), Header{}, ReasonMissing},
		{"v2 tcp4", v2(0x21, 0x11, tcp4Addrs), Header{2, Proxy, src4, netip.MustParseAddrPort("198.51.100.1:443")}, ""},
		{"v2 tcp6", v2(0x21, 0x21, tcp6Addrs), Header{2, Proxy, src6, netip.MustParseAddrPort("[2001:db8::1]:80")}, ""},
		{"v2 tlvs", v2(0x21, 0x11, tcp4Addrs, tlv(0x01, []byte("h2")), tlv(0xEA, bytes.Repeat([]byte{1}, 300)), tlv(0x04, nil)), Header{2, Proxy, src4, netip.MustParseAddrPort("198.51.100.1:443")}, ""},
		{"v2 local", v2(0x20, 0x00, nil), Header{Version: 2, Command: Local}, ""},
		{"v2 local with addresses", v2(0x20, 0x11, tcp4Addrs), Header{Version: 2, Command: Local}, ""},
		{"v2 proxy unspec", v2(0x21, 0x00, nil), Header{Version: 2, Command: Local}, ""},
		{"v2 udp", v2(0x21, 0x12, tcp4Addrs), Header{}, ReasonUnsupported},
		{"v2 unix", v2(0x21, 0x31, make([]byte, 216)), Header{}, ReasonUnsupported},
		{"v2 version 1", v2(0x11, 0x11, tcp4Addrs), Header{}, ReasonMalformed},
		{"v2 command 2", v2(0x22, 0x11, tcp4Addrs), Header{}, ReasonMalformed},
		{"v2 family 0x41", v2(0x21, 0x41, tcp4Addrs), Header{}, ReasonMalformed},
		{"v2 short addresses", v2(0x21, 0x21, tcp4Addrs), Header{}, ReasonMalformed},
		{"v2 tlv past the end", v2(0x21, 0x11, tcp4Addrs, []byte{0x01, 0x00, 0x09, 'h'}), Header{}, ReasonMalformed},
		{"v2 stray bytes", v2(0x21, 0x11, tcp4Addrs, []byte{0x01, 0x00}), Header{}, ReasonMalformed},
		{"v2 oversized", v2(0x21, 0x11, tcp4Addrs, tlv(0xEA, make([]byte, MaxV2Length))), Header{}, ReasonMalformed},
		{"v2 truncated", v2(0x21, 0x11, tcp4Addrs)[:20], Header{}, ReasonTruncated},
		{"v2 wrong signature", append([]byte("\r\n\r\n\x00\r\nQUIT\r"), v2(0x21, 0x11, tcp4Addrs)[12:]...), Header{}, ReasonMissing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Parse, with a request after the header.
			in := append(append([]byte(nil), tc.in...), "GET / HTTP/1.1\r\n\r\n"...)
			if tc.reason == ReasonTruncated {
				in = tc.in
			}
			h, n, err := Parse(in)
			checkResult(t, "Parse", h, err, tc.want, tc.reason)
			if err == nil && n != len(tc.in) {
				t.Errorf("Parse: length %d, want %d", n, len(tc.in))
			}
			// Read, byte by byte as the peer may send it, then from one read.
			for _, r := range []io.Reader{&oneByte{in: in}, bytes.NewReader(in)} {
				h, err := Read(r)
				checkResult(t, "Read", h, err, tc.want, tc.reason)
				if ob, ok := r.(*oneByte); ok && err == nil && ob.n != len(tc.in) {
					t.Errorf("Read took %d bytes, the header has %d", ob.n, len(tc.in))
				}
			}
		})
	}
}

func checkResult(t *testing.T, op string, h Header, err error, want Header, reason string) {
	t.Helper()
	if reason == "" {
		if err != nil || h != want {
			t.Errorf("%s = %+v, %v; want %+v", op, h, err, want)
		}
		return
	}
	if got := ReasonOf(err); err == nil || got != reason {
		t.Errorf("%s = %+v, %v (reason %q); want reason %q", op, h, err, got, reason)
	}
}

// oneByte returns one byte per Read and counts them.
type oneByte struct {
	in []byte
	n  int
}

func (o *oneByte) Read(p []byte) (int, error) {
	if o.n == len(o.in) {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = o.in[o.n]
	o.n++
	return 1, nil
}

// TestReadLeavesTheRequestOnTheSocket sends each header and a request in
// one write over a real TCP connection: after Read, the next bytes on the
// socket are the request's, whole.
func TestReadLeavesTheRequestOnTheSocket(t *testing.T) {
	headers := map[string][]byte{
		"v1 tcp4":    []byte("PROXY TCP4 192.0.2.7 198.51.100.1 56325 443\r\n"),
		"v1 tcp6":    []byte("PROXY TCP6 2001:db8::7 2001:db8::1 12345 80\r\n"),
		"v1 unknown": []byte("PROXY UNKNOWN\r\n"),
		"v1 short":   []byte("PROXY TCP4 1.1.1.1 2.2.2.2 1 2\r\n"),
		"v2 tcp4":    v2(0x21, 0x11, tcp4Addrs),
		"v2 tlvs":    v2(0x21, 0x21, tcp6Addrs, tlv(0x01, []byte("http/1.1")), tlv(0x05, []byte("id-1"))),
		"v2 local":   v2(0x20, 0x00, nil),
	}
	const request = "GET /x HTTP/1.1\r\nHost: a\r\n\r\n"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for name, hdr := range headers {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := c.Write(append(append([]byte(nil), hdr...), request...)); err != nil {
				t.Fatal(err)
			}
			_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
			want, _, _ := Parse(hdr)
			got, err := Read(s)
			if err != nil || got != want {
				t.Fatalf("Read = %+v, %v; want %+v", got, err, want)
			}
			rest := make([]byte, len(request))
			if _, err := io.ReadFull(s, rest); err != nil || string(rest) != request {
				t.Fatalf("after the header: %q, %v; want the request whole", rest, err)
			}
		})
	}
}

// TestReadTimeout: a header that stops short times out at the deadline
// with ReasonTimeout; a peer that closes within it is ReasonTruncated.
func TestReadTimeout(t *testing.T) {
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	go func() { _, _ = c.Write([]byte("PROXY TCP4 192.0.2.7 ")) }()
	_ = s.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := Read(s)
	if got := ReasonOf(err); got != ReasonTimeout {
		t.Fatalf("stalled header: %v (reason %q), want %q", err, got, ReasonTimeout)
	}
	c2, s2 := net.Pipe()
	defer s2.Close()
	go func() { _, _ = c2.Write(v2(0x21, 0x11, tcp4Addrs)[:17]); c2.Close() }()
	_, err = Read(s2)
	if got := ReasonOf(err); got != ReasonTruncated {
		t.Fatalf("closed within the header: %v (reason %q), want %q", err, got, ReasonTruncated)
	}
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("%v is not an *Error", err)
	}
}
