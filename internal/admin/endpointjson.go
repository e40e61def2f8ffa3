package admin

import (
	"github.com/levee-gw/levee/internal/jsonstr"
	"math"
	"strconv"
	"time"
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

// appendJSONString appends s quoted as encoding/json writes a string with
// HTML escaping on (its default): jsonstr.AppendHTMLSafe.
func appendJSONString(b []byte, s string) []byte { return jsonstr.AppendHTMLSafe(b, s) }
