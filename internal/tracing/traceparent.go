package tracing

// Parent is what a W3C traceparent header carries (Trace Context, level
// 2, section 3.2): the trace and the caller's span, and the sampled flag.
type Parent struct {
	TraceID [16]byte
	SpanID  [8]byte
	Sampled bool
}

// ParseTraceparent reads a traceparent value as OpenTelemetry's
// propagator does (FuzzParseTraceparent holds the two to the same
// answer; the propagator also takes a version-00 value ending in "-",
// which the specification refuses and this does not), without
// allocating: version 00 is exactly 55 bytes with the
// flags 00 to 03; a later version (not ff) may carry more fields after a
// "-"; hex is lower case; neither id may be all zeros. ok is false for
// anything else, which the request path then treats as no parent (the
// trace restarts at levee, as the specification says).
func ParseTraceparent(s string) (p Parent, ok bool) {
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return Parent{}, false
	}
	var ver, flags [1]byte
	if !unhex(ver[:], s[0:2]) || ver[0] == 0xff || !unhex(p.TraceID[:], s[3:35]) || !unhex(p.SpanID[:], s[36:52]) || !unhex(flags[:], s[53:55]) {
		return Parent{}, false
	}
	if ver[0] == 0 {
		if len(s) != 55 || flags[0] > 3 {
			return Parent{}, false
		}
	} else if len(s) > 55 && s[55] != '-' {
		return Parent{}, false
	}
	if p.TraceID == ([16]byte{}) || p.SpanID == ([8]byte{}) {
		return Parent{}, false
	}
	p.Sampled = flags[0]&1 == 1
	return p, true
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
