// Package jsonstr writes Go strings as JSON strings into a byte buffer
// without allocating: the one escaper the access log, the data APIs'
// encoders and the admin API's streamed lists share.
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// plain and htmlSafe mark the ASCII bytes that stand for themselves inside
// a JSON string: printable ASCII but '"' and '\\'; htmlSafe also leaves
// out '<', '>' and '&', as encoding/json does by default.
var plain, htmlSafe = func() (p, h [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		p[c] = c != '"' && c != '\\'
		h[c] = p[c] && c != '<' && c != '>' && c != '&'
	}
	return p, h
}()

// Append appends s as a JSON string (RFC 8259): quote, backslash and
// control characters escaped (\n \r \t \b \f by name, the others as
// \u00XX), U+2028 and U+2029 escaped (JavaScript's line separators, so the
// text is also a valid JavaScript literal), invalid UTF-8 replaced by
// U+FFFD (as \ufffd). Other characters are copied as they are, runs of
// them in one copy.
func Append(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscaped(b, s, &plain)
	return append(b, '"')
}

// AppendEscaped appends s escaped as Append does, without the quotes: a
// piece of a JSON string built from several parts.
func AppendEscaped(b []byte, s string) []byte { return appendEscaped(b, s, &plain) }

// AppendHTMLSafe is Append that also escapes '<', '>' and '&' (as
// \u003c, \u003e, \u0026): the bytes encoding/json writes by default, for
// documents a browser may be tricked into reading as HTML.
func AppendHTMLSafe(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscaped(b, s, &htmlSafe)
	return append(b, '"')
}

func appendEscaped(b []byte, s string, safe *[utf8.RuneSelf]bool) []byte {
	start := 0 // s[start:i] is still to be appended as it is
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}
