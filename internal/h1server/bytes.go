// Byte classes and small byte helpers of the request-head parser: the
// token, path and host tables (RFC 9110/9112 grammar), control-character
// checks, canonicalisation and case-insensitive token matching.

package h1server

import (
	"bytes"
)

// plainPathByte reports whether c stands for itself in a path: the bytes
// url's encodePath mode leaves unescaped, less '%' (percent-encoding) and
// '?' (the query).
func plainPathByte(c byte) bool {
	return plainPath[c]
}

var plainPath = alnumAnd("-_.~$&+,/:;=@")

// tokenTable marks RFC 9110 tchar bytes (field names, methods).
var tokenTable = alnumAnd("!#$%&'*+-.^_`|~")

// alnumAnd returns a table marking ASCII letters, digits and the bytes of
// extra.
func alnumAnd(extra string) (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	for i := 0; i < len(extra); i++ {
		t[extra[i]] = true
	}
	return t
}

func allToken(b []byte) bool {
	for _, c := range b {
		if !tokenTable[c] {
			return false
		}
	}
	return true
}

// validValueByte: VCHAR, SP, HTAB and obs-text, as net/textproto accepts.
func validValueByte(c byte) bool {
	return c >= 0x20 && c != 0x7f || c == '\t'
}

func hasCTL(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// validVersionShape reports whether v looks like "HTTP/d.d", which
// net/http's ParseHTTPVersion accepts.
func validVersionShape(v []byte) bool {
	return len(v) == 8 && string(v[:5]) == "HTTP/" && v[5] >= '0' && v[5] <= '9' && v[6] == '.' && v[7] >= '0' && v[7] <= '9'
}

// validHost mirrors httpguts.ValidHostHeader: any byte of a host, a port,
// an IPv6 literal or a zone.
func validHost(b []byte) bool {
	for _, c := range b {
		if !hostTable[c] {
			return false
		}
	}
	return true
}

var hostTable = alnumAnd("!$%&'()*+,-.:;=[]_~")

// canonicalize rewrites a valid field name in place to its canonical form
// (textproto.CanonicalMIMEHeaderKey): upper case first and after each '-',
// lower case elsewhere.
func canonicalize(b []byte) {
	upper := true
	for i, c := range b {
		if upper && 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		} else if !upper && 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
}

// hasToken reports whether the comma-separated list v holds tok (ASCII
// case-insensitive, optional whitespace around elements), as
// httpguts.HeaderValuesContainsToken does for one value.
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var el []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			el, v = v[:i], v[i+1:]
		} else {
			el, v = v, nil
		}
		el = bytes.Trim(el, " \t")
		if len(el) == len(tok) && asciiEqualFold(el, tok) {
			return true
		}
	}
	return false
}

func asciiEqualFold(b []byte, s string) bool {
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
