package proxyproto

import (
	"bytes"
	"testing"
)

// FuzzRead: Read and Parse agree on every input; Read never reads past the
// header it returns; a header it accepts is within the bounds.
func FuzzRead(f *testing.F) {
	f.Add([]byte("PROXY TCP4 192.0.2.7 198.51.100.1 56325 443\r\nGET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte("PROXY TCP6 2001:db8::7 2001:db8::1 12345 80\r\n"))
	f.Add([]byte("PROXY UNKNOWN\r\nGET"))
	f.Add(v2(0x21, 0x11, tcp4Addrs, tlv(0x01, []byte("h2"))))
	f.Add(v2(0x21, 0x21, tcp6Addrs))
	f.Add(v2(0x20, 0x00, nil))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		ph, pn, perr := Parse(in)
		r := &oneByte{in: in}
		rh, rerr := Read(r)
		if perr == nil {
			if pn <= 0 || pn > len(in) {
				t.Fatalf("Parse length %d of %d bytes", pn, len(in))
			}
			if pn > MaxV1Length && !bytes.HasPrefix(in, sigV2) || pn > 16+MaxV2Length {
				t.Fatalf("accepted a header of %d bytes", pn)
			}
			if rerr != nil || rh != ph || r.n != pn {
				t.Fatalf("Parse = %+v (%d bytes); Read = %+v, %v after %d bytes", ph, pn, rh, rerr, r.n)
			}
			if ph.Command == Proxy && (!ph.Source.IsValid() || ph.Source.Addr().Is4In6()) {
				t.Fatalf("PROXY header with source %v", ph.Source)
			}
			return
		}
		if rerr == nil {
			t.Fatalf("Read accepted %+v where Parse refused: %v", rh, perr)
		}
		// A complete input refused by Parse for a reason other than
		// being short is refused by Read for the same reason (Read may
		// run out of input first: it reads 15 bytes before deciding).
		short := ReasonOf(rerr) == ReasonTruncated && r.n == len(in)
		if ReasonOf(perr) != ReasonTruncated && !short && ReasonOf(rerr) != ReasonOf(perr) {
			t.Fatalf("Parse: %v; Read: %v", perr, rerr)
		}
	})
}
