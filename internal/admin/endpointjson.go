package admin

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendEndpoint appends ev as json.MarshalIndent(ev, prefix, "  ") would
// write it, byte for byte (FuzzEndpointJSON holds it to that), without
// allocating: a page lists up to MaxEndpointPage endpoints, and a walk of
// 100,000 through encoding/json made about 200 bytes of garbage per
// endpoint (the view boxed in an interface, the time's MarshalJSON),
// enough for eight walks at once to grow the heap by its live size
// before the collector ran.
func appendEndpoint(b []byte, prefix string, ev *EndpointView) []byte {
	field := func(b []byte, name string) []byte {
		b = append(b, ",\n"...)
		b = append(b, prefix...)
		b = append(b, `  "`...)
		b = append(b, name...)
		return append(b, `": `...)
	}
	b = append(b, "{\n"...)
	b = append(b, prefix...)
	b = append(b, `  "address": `...)
	b = appendJSONString(b, ev.Address)
	b = appendJSONFloat(field(b, "weight"), ev.Weight)
	b = appendJSONFloat(field(b, "effective_weight"), ev.EffectiveWeight)
	if ev.Zone != "" {
		b = appendJSONString(field(b, "zone"), ev.Zone)
	}
	b = appendJSONString(field(b, "state"), ev.State)
	b = strconv.AppendInt(field(b, "ejections"), int64(ev.Ejections), 10)
	if ev.LastReason != "" {
		b = appendJSONString(field(b, "last_reason"), ev.LastReason)
	}
	if !ev.Since.IsZero() {
		b = appendJSONTime(field(b, "since"), ev.Since)
	}
	b = strconv.AppendInt(field(b, "inflight"), ev.Inflight, 10)
	b = strconv.AppendUint(field(b, "requests"), ev.Requests, 10)
	b = strconv.AppendUint(field(b, "failures"), ev.Failures, 10)
	b = append(b, '\n')
	b = append(b, prefix...)
	return append(b, '}')
}

// appendJSONFloat appends f as encoding/json writes a float64 (NaN and
// infinities, which it refuses, as 0: weights are never such).
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONTime appends t as time.Time.MarshalJSON writes it (RFC 3339
// with nanoseconds); a year outside [0,9999], which MarshalJSON refuses,
// is written all the same.
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json writes a string with
// HTML escaping on (its default): <, > and & as \u003c..., control
// characters escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
