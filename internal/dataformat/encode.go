package dataformat

import (
	"github.com/levee-gw/levee/internal/jsonstr"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// The appenders below write one value in place at the end of a buffer and
// allocate nothing; strings go through jsonstr, the one JSON string
// escaper (telemetry's AppendJSONString also cuts at 2 KiB, right for an
// access log, wrong for data).

// maxSafeInt is 2^53: integers of at most this magnitude are exact in an
// IEEE 754 double, so every JSON parser reads them back unchanged.
const maxSafeInt = 1 << 53

// appendJSONString appends s as a JSON string: jsonstr.Append (RFC 8259,
// U+2028 and U+2029 escaped, invalid UTF-8 as \ufffd).
func appendJSONString(b []byte, s string) []byte { return jsonstr.Append(b, s) }

// appendJSONInt appends v as a JSON number when |v| <= 2^53, and as a JSON
// string of its decimal digits beyond, where a double (what most JSON
// parsers read numbers into) would round it.
func appendJSONInt(b []byte, v int64) []byte {
	if v >= -maxSafeInt && v <= maxSafeInt {
		return strconv.AppendInt(b, v, 10)
	}
	b = append(b, '"')
	b = strconv.AppendInt(b, v, 10)
	return append(b, '"')
}

// appendFloat appends a finite f as encoding/json writes it: the shortest
// decimal that reads back as the same float64, without an exponent for
// 1e-6 <= |f| < 1e21, with one (two-digit minimum dropped: 1e-7, not
// 1e-07) outside. NaN and the infinities, which JSON numbers cannot hold,
// are NaN, Infinity and -Infinity (PostgreSQL's own spellings); the JSON
// encoder quotes them.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONFloat appends f as a JSON number, or as a string when it is NaN
// or infinite.
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		b = append(b, '"')
		b = appendFloat(b, f)
		return append(b, '"')
	}
	return appendFloat(b, f)
}

// appendTime appends t as RFC 3339 in UTC ("Z"), with fractional seconds
// only when they are not zero, and trailing zeros dropped. It reports false
// for a year outside 0000-9999, which RFC 3339 cannot write (PostgreSQL
// allows years to 294276).
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	return t.AppendFormat(b, time.RFC3339Nano), true
}

// appendCSVField appends s as one CSV field (RFC 4180), quoted when it must
// be: when it holds a comma, quote, CR or LF, starts or ends with a space or
// tab (which some readers trim), is empty (an unquoted empty field is
// NULL), or is \. (PostgreSQL's COPY end marker). Quotes inside are
// doubled; invalid UTF-8 is replaced by U+FFFD, since the answer is
// declared UTF-8.
func appendCSVField(b []byte, s string) []byte {
	quote := s == "" || s == `\.` ||
		s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t'
	ascii := true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ',' || c == '"' || c == '\r' || c == '\n':
			quote = true
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if !quote && ascii {
		return append(b, s...)
	}
	if quote {
		b = append(b, '"')
	}
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c == '"' {
			b = append(b, s[start:i+1]...) // the quote itself, then its double
			b = append(b, '"')
			i++
			start = i
			continue
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	if quote {
		b = append(b, '"')
	}
	return b
}

// appendCleanText appends s with invalid UTF-8 replaced by U+FFFD and
// control characters by spaces, cut to at most max bytes on a character
// boundary: for an abort line's message, which must stay one line.
func appendCleanText(b []byte, s string, max int) []byte {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		w := utf8.RuneLen(r)
		if n+w > max {
			break
		}
		b = utf8.AppendRune(b, r)
		n += w
		i += size
	}
	return b
}
