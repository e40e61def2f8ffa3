package tracing

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// FuzzParseTraceparent holds ParseTraceparent to OpenTelemetry's own
// propagator: the same values valid (but for one the specification
// refuses), with the same ids and sampled flag
// (the request path decides sampling from ours, and continues the trace
// with theirs); and what it accepts formats back unchanged for version 00.
func FuzzParseTraceparent(f *testing.F) {
	for _, s := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-extra",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
		"", "00", "garbage",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := ParseTraceparent(s)
		var sc trace.SpanContext
		if s != "" {
			h := http.Header{"Traceparent": {s}}
			sc = trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
		}
		// One difference is allowed: OpenTelemetry takes a version-00 value
		// with a trailing "-" that the specification refuses (exactly 55
		// bytes); ParseTraceparent refuses it, and levee restarts the trace.
		specRefuses := len(s) >= 2 && s[:2] == "00" && len(s) != 55
		// The other: OpenTelemetry refuses a version-00 value whose flags
		// set bits above 0x03; levee takes any flags and reads only the
		// sampled bit (the W3C rule: unknown flags are not a reason to
		// restart the trace), so "-ff" continues the caller's trace.
		var fl [1]byte
		unknownFlags := len(s) == 55 && s[:2] == "00" && unhex(fl[:], s[53:55]) && fl[0] > 3
		if ok != sc.IsValid() && !(specRefuses && !ok) && !(unknownFlags && ok) {
			t.Fatalf("%q: ours valid %v, OpenTelemetry's %v", s, ok, sc.IsValid())
		}
		if !ok || !sc.IsValid() {
			return
		}
		if p.TraceID != sc.TraceID() || p.SpanID != sc.SpanID() || p.Sampled != sc.IsSampled() {
			t.Fatalf("%q: ours %x %x %v, OpenTelemetry's %s %s %v", s, p.TraceID, p.SpanID, p.Sampled, sc.TraceID(), sc.SpanID(), sc.IsSampled())
		}
		if s[:2] == "00" && s[53:] == "00" || s[:2] == "00" && s[53:] == "01" {
			if got := formatTraceparent(p.TraceID, p.SpanID, p.Sampled); got != s {
				t.Fatalf("%q formats back as %q", s, got)
			}
		}
	})
}

// TestParseTraceparentAllocs: parsing costs the request path nothing.
func TestParseTraceparentAllocs(t *testing.T) {
	s := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseTraceparent(s) }); n != 0 {
		t.Errorf("ParseTraceparent allocates %v times", n)
	}
}
