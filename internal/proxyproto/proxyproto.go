// Package proxyproto reads the PROXY protocol header (HAProxy's
// specification, versions 1 and 2) that a load balancer sends at the start
// of a TCP connection to say whose connection it relays.
//
// The parser is strict: a version 1 line is at most 107 bytes (CRLF
// included), with single spaces, TCP4 addresses in dotted decimal, TCP6
// addresses in IPv6 text form without a zone, decimal ports without
// leading zeros; UNKNOWN takes anything printable up to the CRLF. A version
// 2 header is the 12-byte signature, version 2 with the LOCAL or PROXY
// command, a family (TCP over IPv4 or IPv6, or UNSPEC), and a length of at
// most MaxV2Length bytes that must hold the addresses; the TLVs after them
// are skipped but must tile the rest of the length exactly (each read
// within it, so their walk is bounded by it). UDP and UNIX families are
// refused (ReasonUnsupported): levee serves TCP.
//
// Read never reads a byte past the header: what follows it is the
// client's first request, left in the connection.
package proxyproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
)

// Command is what a header says of its connection.
type Command uint8

const (
	// Proxy: the connection relays a client's; Source is that client.
	Proxy Command = iota + 1
	// Local: the proxy's own connection (a health check), or a version 1
	// UNKNOWN or version 2 UNSPEC header: the peer's address stands.
	Local
)

// Header is a parsed PROXY protocol header.
type Header struct {
	// Version is 1 or 2.
	Version int
	// Command is Proxy or Local.
	Command Command
	// Source and Destination are the relayed connection's addresses
	// (IPv4 addresses as such, never 4-in-6); both invalid when Command
	// is Local.
	Source, Destination netip.AddrPort
}

// Bounds of a header.
const (
	// MaxV1Length is the longest version 1 line, CRLF included
	// (the specification's bound).
	MaxV1Length = 107
	// MaxV2Length bounds the length field of a version 2 header (the
	// bytes after its 16-byte fixed part: addresses and TLVs). The
	// specification allows 65535; load balancers send a few hundred.
	MaxV2Length = 4096 - 16
	// v1Min is the shortest version 1 line ("PROXY UNKNOWN\r\n") and so
	// the most Read may take before it knows the version.
	v1Min = 15
)

// Reasons a header is refused, stable (the metric
// levee_proxy_protocol_refused_total's labels, with the callers' own
// ReasonUntrusted and ReasonTimeout).
const (
	// ReasonMissing: the connection does not start with a PROXY header.
	ReasonMissing = "missing"
	// ReasonMalformed: it starts as one but breaks the grammar or a bound.
	ReasonMalformed = "malformed"
	// ReasonUnsupported: a version 2 PROXY header for UDP or a UNIX socket.
	ReasonUnsupported = "unsupported"
	// ReasonTruncated: the connection ended within the header.
	ReasonTruncated = "truncated"
	// ReasonTimeout: the header was not complete by the deadline.
	ReasonTimeout = "timeout"
	// ReasonUntrusted: a connection from a peer outside the trusted
	// prefixes (the caller's decision; no header is read).
	ReasonUntrusted = "untrusted"
)

// Reasons lists every refusal reason, in a fixed order.
func Reasons() []string {
	return []string{ReasonUntrusted, ReasonMissing, ReasonMalformed, ReasonUnsupported, ReasonTruncated, ReasonTimeout}
}

// Error is a refused header.
type Error struct {
	// Reason is one of the Reason constants.
	Reason string
	// Detail says what was wrong, for logs.
	Detail string
}

func (e *Error) Error() string { return "proxy protocol: " + e.Reason + ": " + e.Detail }

func refuse(reason, format string, args ...any) error {
	return &Error{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf returns err's reason: an *Error's, ReasonTimeout for a deadline
// passed, ReasonTruncated for any other read error.
func ReasonOf(err error) string {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Reason
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ReasonTimeout
	}
	return ReasonTruncated
}

var (
	sigV2 = []byte("\r\n\r\n\x00\r\nQUIT\n")
	sigV1 = []byte("PROXY ")
)

// Read reads one header from r, never a byte past its end (reads are sized
// to what the header must still hold). A read error is returned as it
// came (a deadline: ReasonOf gives ReasonTimeout), io.ErrUnexpectedEOF
// and io.EOF as ReasonTruncated.
func Read(r io.Reader) (Header, error) {
	var buf [MaxV1Length]byte
	if err := readFull(r, buf[:v1Min]); err != nil {
		return Header{}, err
	}
	switch {
	case bytes.Equal(buf[:len(sigV2)], sigV2):
		if err := readFull(r, buf[v1Min:16]); err != nil {
			return Header{}, err
		}
		n, err := v2Length(buf[:16])
		if err != nil {
			return Header{}, err
		}
		rest := make([]byte, 16+n)
		copy(rest, buf[:16])
		if err := readFull(r, rest[16:]); err != nil {
			return Header{}, err
		}
		h, _, err := Parse(rest)
		return h, err
	case bytes.Equal(buf[:len(sigV1)], sigV1):
		n := v1Min
		for {
			if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
				h, m, err := Parse(buf[:n])
				if err == nil && m != n {
					err = refuse(ReasonMalformed, "bytes after the line") // unreachable: Parse ends at the first LF
				}
				return h, err
			}
			need, err := v1Need(buf[:n])
			if err != nil {
				return Header{}, err
			}
			if n+need > MaxV1Length {
				return Header{}, refuse(ReasonMalformed, "version 1 line longer than %d bytes", MaxV1Length)
			}
			if err := readFull(r, buf[n:n+need]); err != nil {
				return Header{}, err
			}
			n += need
		}
	}
	return Header{}, refuse(ReasonMissing, "the connection starts with %q", printable(buf[:v1Min]))
}

func readFull(r io.Reader, b []byte) error {
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return refuse(ReasonTruncated, "the connection ended within the header")
		}
		return err
	}
	return nil
}

// v1Need returns how many bytes a version 1 line that starts with b (no LF
// yet) still holds at least, so that reading them cannot pass its end.
func v1Need(b []byte) (int, error) {
	last := b[len(b)-1]
	if last == '\r' {
		return 1, nil
	}
	if i := bytes.IndexByte(b, '\r'); i >= 0 {
		return 0, refuse(ReasonMalformed, "CR within the line")
	}
	if bytes.HasPrefix(b, []byte("PROXY UNKNOWN")) {
		return 2, nil // anything may follow, up to CRLF
	}
	spaces := bytes.Count(b, []byte{' '})
	if spaces > 5 {
		return 0, refuse(ReasonMalformed, "more than 6 fields")
	}
	// Each missing space is followed by a field of at least one byte,
	// then CRLF.
	need := 2*(5-spaces) + 2
	if last == ' ' {
		need++
	}
	return need, nil
}

// v2Length checks a version 2 fixed part (16 bytes, signature matched)
// and returns its length field.
func v2Length(b []byte) (int, error) {
	if b[12]>>4 != 2 {
		return 0, refuse(ReasonMalformed, "version %d in a version 2 signature", b[12]>>4)
	}
	if cmd := b[12] & 0xf; cmd > 1 {
		return 0, refuse(ReasonMalformed, "command %d", cmd)
	}
	n := int(binary.BigEndian.Uint16(b[14:16]))
	if n > MaxV2Length {
		return 0, refuse(ReasonMalformed, "length %d over %d", n, MaxV2Length)
	}
	return n, nil
}

// Parse parses the header at the start of b and returns it with its
// length; b may hold more (the request after it). An incomplete header is
// ReasonTruncated.
func Parse(b []byte) (Header, int, error) {
	switch {
	case len(b) >= len(sigV2) && bytes.Equal(b[:len(sigV2)], sigV2):
		return parseV2(b)
	case len(b) >= len(sigV1) && bytes.Equal(b[:len(sigV1)], sigV1):
		return parseV1(b)
	case len(b) < len(sigV2) && (bytes.HasPrefix(sigV2, b) || bytes.HasPrefix(sigV1, b)):
		return Header{}, 0, refuse(ReasonTruncated, "%d bytes", len(b))
	}
	return Header{}, 0, refuse(ReasonMissing, "the connection starts with %q", printable(b[:min(len(b), v1Min)]))
}

func parseV2(b []byte) (Header, int, error) {
	if len(b) < 16 {
		return Header{}, 0, refuse(ReasonTruncated, "%d bytes of a version 2 header", len(b))
	}
	n, err := v2Length(b[:16])
	if err != nil {
		return Header{}, 0, err
	}
	if len(b) < 16+n {
		return Header{}, 0, refuse(ReasonTruncated, "%d bytes of %d", len(b), 16+n)
	}
	h := Header{Version: 2, Command: Local}
	body := b[16 : 16+n]
	fam := b[13]
	var addrLen int
	switch fam {
	case 0x00: // UNSPEC
	case 0x11: // TCP over IPv4
		addrLen = 12
	case 0x21: // TCP over IPv6
		addrLen = 36
	case 0x12, 0x22, 0x31, 0x32: // UDP over IPv4, IPv6; UNIX stream, datagram
		if b[12]&0xf == 1 {
			return Header{}, 0, refuse(ReasonUnsupported, "family 0x%02x", fam)
		}
		addrLen = 216
		switch fam {
		case 0x12:
			addrLen = 12
		case 0x22:
			addrLen = 36
		}
	default:
		return Header{}, 0, refuse(ReasonMalformed, "family 0x%02x", fam)
	}
	if n < addrLen {
		return Header{}, 0, refuse(ReasonMalformed, "length %d cannot hold the addresses (%d)", n, addrLen)
	}
	if err := checkTLVs(body[addrLen:]); err != nil {
		return Header{}, 0, err
	}
	if b[12]&0xf == 0 || fam == 0 {
		return h, 16 + n, nil // LOCAL, or PROXY with UNSPEC: the peer stands
	}
	h.Command = Proxy
	if fam == 0x11 {
		src := netip.AddrFrom4([4]byte(body[0:4]))
		dst := netip.AddrFrom4([4]byte(body[4:8]))
		h.Source = netip.AddrPortFrom(src, binary.BigEndian.Uint16(body[8:10]))
		h.Destination = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(body[10:12]))
	} else {
		src := netip.AddrFrom16([16]byte(body[0:16])).Unmap()
		dst := netip.AddrFrom16([16]byte(body[16:32])).Unmap()
		h.Source = netip.AddrPortFrom(src, binary.BigEndian.Uint16(body[32:34]))
		h.Destination = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(body[34:36]))
	}
	return h, 16 + n, nil
}

// checkTLVs walks the type-length-value records after the addresses: each
// must fit in what is left, and they must end exactly at the header's end.
// At most len(b)/3 steps (a record is at least 3 bytes).
func checkTLVs(b []byte) error {
	for len(b) > 0 {
		if len(b) < 3 {
			return refuse(ReasonMalformed, "%d stray bytes after the TLVs", len(b))
		}
		l := int(binary.BigEndian.Uint16(b[1:3]))
		if 3+l > len(b) {
			return refuse(ReasonMalformed, "TLV 0x%02x of %d bytes past the header's end", b[0], l)
		}
		b = b[3+l:]
	}
	return nil
}

func parseV1(b []byte) (Header, int, error) {
	end := bytes.IndexByte(b[:min(len(b), MaxV1Length)], '\n')
	if end < 0 {
		if len(b) >= MaxV1Length {
			return Header{}, 0, refuse(ReasonMalformed, "no LF within %d bytes", MaxV1Length)
		}
		return Header{}, 0, refuse(ReasonTruncated, "%d bytes of a version 1 line", len(b))
	}
	if end == 0 || b[end-1] != '\r' {
		return Header{}, 0, refuse(ReasonMalformed, "a line not ended by CRLF")
	}
	line := b[len(sigV1) : end-1]
	for _, c := range line {
		if c < ' ' || c > '~' {
			return Header{}, 0, refuse(ReasonMalformed, "byte 0x%02x in the line", c)
		}
	}
	if rest, ok := bytes.CutPrefix(line, []byte("UNKNOWN")); ok && (len(rest) == 0 || rest[0] == ' ') {
		return Header{Version: 1, Command: Local}, end + 1, nil
	}
	var f [5][]byte
	rest := line
	for i := range 5 {
		var ok bool
		if i < 4 {
			f[i], rest, ok = bytes.Cut(rest, []byte{' '})
			if !ok {
				return Header{}, 0, refuse(ReasonMalformed, "%d fields, want 6", i+2)
			}
		} else {
			f[i] = rest
		}
		if len(f[i]) == 0 {
			return Header{}, 0, refuse(ReasonMalformed, "an empty field (double space?)")
		}
	}
	var want6 bool
	switch string(f[0]) {
	case "TCP4":
	case "TCP6":
		want6 = true
	default:
		return Header{}, 0, refuse(ReasonMalformed, "protocol %q", printable(f[0]))
	}
	src, err := v1Addr(f[1], want6)
	if err != nil {
		return Header{}, 0, err
	}
	dst, err := v1Addr(f[2], want6)
	if err != nil {
		return Header{}, 0, err
	}
	sp, err := v1Port(f[3])
	if err != nil {
		return Header{}, 0, err
	}
	dp, err := v1Port(f[4])
	if err != nil {
		return Header{}, 0, err
	}
	return Header{Version: 1, Command: Proxy, Source: netip.AddrPortFrom(src, sp), Destination: netip.AddrPortFrom(dst, dp)}, end + 1, nil
}

func v1Addr(s []byte, want6 bool) (netip.Addr, error) {
	a, err := netip.ParseAddr(string(s))
	if err != nil || a.Zone() != "" || a.Is4() == want6 {
		return netip.Addr{}, refuse(ReasonMalformed, "address %q", printable(s))
	}
	return a.Unmap(), nil
}

func v1Port(s []byte) (uint16, error) {
	if len(s) > 5 || (len(s) > 1 && s[0] == '0') {
		return 0, refuse(ReasonMalformed, "port %q", printable(s))
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, refuse(ReasonMalformed, "port %q", printable(s))
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, refuse(ReasonMalformed, "port %q", printable(s))
	}
	return uint16(n), nil
}

// printable bounds and quotes outside bytes for an error message.
func printable(b []byte) string {
	if len(b) > 32 {
		b = b[:32]
	}
	return string(b)
}
