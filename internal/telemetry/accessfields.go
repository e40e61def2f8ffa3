package telemetry

import (
	"github.com/levee-gw/levee/internal/jsonstr"
	"net/url"
	"strings"

	"github.com/levee-gw/levee/internal/tracing"
)

// TraceIDOf returns the trace id of a W3C Trace Context traceparent
// header value, as tracing.TraceIDOf reads it (tracing.ParseTraceparent is
// levee's one traceparent parser, so the access log's trace_id is the trace
// the tracer continues), or "" for a value the tracer would not continue.
// The result is a substring of s (no allocation).
func TraceIDOf(s string) string { return tracing.TraceIDOf(s) }

// redacted replaces the value of a query key the access log redacts.
const redacted = "REDACTED"

// appendQuery appends the raw query q as a JSON string, truncated to
// maxLoggedString bytes before anything else (so a cut can never expose
// part of a redacted value: the key is whole or its value is gone), with
// the value of every key in redact replaced by REDACTED. Pairs are split
// at "&" and ";" (some servers take either, so redaction does too); keys
// are compared case-insensitively after percent-decoding, so that
// "%74oken" or "Token" cannot slip a token past a "token" rule.
func appendQuery(b []byte, q string, redact []string) []byte {
	if len(q) > maxLoggedString {
		q = q[:maxLoggedString]
	}
	b = append(b, '"')
	// Each pass takes one pair off q: at most len(q) passes.
	for len(q) > 0 {
		pair, rest, sep := q, "", byte(0)
		for i := 0; i < len(q); i++ {
			if q[i] == '&' || q[i] == ';' {
				pair, rest, sep = q[:i], q[i+1:], q[i]
				break
			}
		}
		if k, _, ok := strings.Cut(pair, "="); ok && redactedKey(k, redact) {
			b = jsonstr.AppendEscaped(b, k)
			b = append(b, '=')
			b = append(b, redacted...)
		} else {
			b = jsonstr.AppendEscaped(b, pair)
		}
		if sep != 0 {
			b = append(b, sep)
		}
		q = rest
	}
	return append(b, '"')
}

// redactedKey reports whether the raw query key k names one of redact.
func redactedKey(k string, redact []string) bool {
	if len(redact) == 0 {
		return false
	}
	if strings.ContainsAny(k, "%+") {
		if d, err := url.QueryUnescape(k); err == nil {
			k = d
		}
	}
	for _, r := range redact {
		if strings.EqualFold(k, r) {
			return true
		}
	}
	return false
}
