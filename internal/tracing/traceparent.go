package tracing

// Parent is what a W3C traceparent header carries (Trace Context, level
// 2, section 3.2): the trace and the caller's span, and the sampled flag.
type Parent struct {
	TraceID [16]byte
	SpanID  [8]byte
	Sampled bool
	// Flags is the trace-flags byte as sent (Sampled is its bit 0x01).
	Flags byte
}

// ParseTraceparent is levee's one traceparent parser (W3C Trace Context,
// section 3.2, as OpenTelemetry reads it), for the tracer (Begin) and the
// access log (TraceIDOf) alike, without allocating:
//   - version 00 is exactly 55 bytes (no extra field, no trailing "-");
//   - a later version (not ff, which is invalid) may carry more fields
//     after a "-" and is read as version 00 up to them;
//   - the version, ids and flags are lower-case hex;
//   - neither id may be all zeros;
//   - the flags are any two hex digits, "ff" included: only the sampled
//     bit (0x01) is read, the others are the caller's (section 3.2.2.5:
//     a receiver does not refuse flags it does not know).
//
// ok is false for anything else, which the request path then treats as
// no parent (the trace restarts at levee, as the specification says).
// FuzzParseTraceparent holds this to OpenTelemetry's propagator but for two
// differences, both listed there.
func ParseTraceparent(s string) (p Parent, ok bool) {
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return Parent{}, false
	}
	var ver, flags [1]byte
	if !unhex(ver[:], s[0:2]) || ver[0] == 0xff || !unhex(p.TraceID[:], s[3:35]) || !unhex(p.SpanID[:], s[36:52]) || !unhex(flags[:], s[53:55]) {
		return Parent{}, false
	}
	if ver[0] == 0 {
		if len(s) != 55 {
			return Parent{}, false
		}
	} else if len(s) > 55 && s[55] != '-' {
		return Parent{}, false
	}
	if p.TraceID == ([16]byte{}) || p.SpanID == ([8]byte{}) {
		return Parent{}, false
	}
	p.Flags, p.Sampled = flags[0], flags[0]&1 == 1
	return p, true
}

// TraceIDOf returns the trace id of a traceparent value, as it appears in
// it (32 lower-case hex digits, no allocation), or "" when
// ParseTraceparent refuses the value: the access log's trace_id is the
// trace the tracer continues, or none.
func TraceIDOf(s string) string {
	if _, ok := ParseTraceparent(s); !ok {
		return ""
	}
	return s[3:35]
}

// unhex decodes lower-case hex s into dst (len(s) == 2*len(dst)).
func unhex(dst []byte, s string) bool {
	for i := range dst {
		hi, ok1 := nibble(s[2*i])
		lo, ok2 := nibble(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func nibble(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// formatTraceparent writes a version-00 traceparent for the ids.
func formatTraceparent(trace [16]byte, span [8]byte, sampled bool) string {
	const hexdigits = "0123456789abcdef"
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	for i, c := range trace {
		b[3+2*i], b[4+2*i] = hexdigits[c>>4], hexdigits[c&0xf]
	}
	b[35] = '-'
	for i, c := range span {
		b[36+2*i], b[37+2*i] = hexdigits[c>>4], hexdigits[c&0xf]
	}
	b[52], b[53], b[54] = '-', '0', '0'
	if sampled {
		b[54] = '1'
	}
	return string(b[:])
}
