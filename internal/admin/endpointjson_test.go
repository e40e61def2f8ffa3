package admin

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// checkEndpointJSON fails unless appendEndpoint writes ev exactly as
// json.MarshalIndent does, at two indentations.
func checkEndpointJSON(t *testing.T, ev EndpointView) {
	t.Helper()
	for _, prefix := range []string{"", "      "} {
		want, err := json.MarshalIndent(ev, prefix, "  ")
		if err != nil {
			return // a value encoding/json refuses (a year past 9999): not ours to match
		}
		if got := appendEndpoint(nil, prefix, &ev); string(got) != string(want) {
			t.Fatalf("appendEndpoint(%+v, prefix %q):\n%s\nencoding/json:\n%s", ev, prefix, got, want)
		}
	}
}

// TestAppendEndpointMatchesEncodingJSON: the hand-written encoder of the
// endpoint pages writes what encoding/json wrote before them.
func TestAppendEndpointMatchesEncodingJSON(t *testing.T) {
	since := time.Date(2025, 3, 4, 5, 6, 7, 890, time.FixedZone("x", 3600))
	for _, ev := range []EndpointView{
		{},
		{Address: "10.0.0.1:80", Weight: 1, EffectiveWeight: 0.5, State: "healthy"},
		{Address: "[::1]:8080", Weight: 42949672.95, EffectiveWeight: 0.01, Zone: "eu-1", State: "slow_start", Ejections: 3,
			LastReason: "check_failed: dial tcp: <refused> & \"gone\"\n\t\\", Since: since, Inflight: -1, Requests: math.MaxUint64, Failures: 7},
		{Address: "bad\xffutf8\u2028\u2029\x00\x1f\x7f é", Weight: 1e-7, EffectiveWeight: 1e21, State: "ejected", Since: since.UTC()},
		{Address: "a", Weight: math.Copysign(0, -1), EffectiveWeight: 123456789.123, Since: time.Unix(0, 1)},
	} {
		checkEndpointJSON(t, ev)
	}
}

// FuzzEndpointJSON holds appendEndpoint to encoding/json over any strings,
// weights, counters and times.
func FuzzEndpointJSON(f *testing.F) {
	f.Add("10.0.0.1:80", "eu", "healthy", "check_failed: <x>", 1.5, 0.0, int64(0), int64(-1), uint64(3))
	f.Add("\xff\u2028\"\\", "", "", "", 1e-9, 1e22, int64(1700000000123456789), int64(0), uint64(0))
	f.Fuzz(func(t *testing.T, addr, zone, state, reason string, w, eff float64, sinceNanos, inflight int64, requests uint64) {
		if math.IsNaN(w) || math.IsInf(w, 0) || math.IsNaN(eff) || math.IsInf(eff, 0) {
			return // encoding/json refuses them; weights are finite
		}
		ev := EndpointView{Address: addr, Weight: w, EffectiveWeight: eff, Zone: zone, State: state, LastReason: reason,
			Inflight: inflight, Requests: requests, Failures: requests / 2, Ejections: int(inflight % 1000)}
		if sinceNanos != 0 {
			ev.Since = time.Unix(0, sinceNanos).UTC()
		}
		checkEndpointJSON(t, ev)
	})
}

// TestAppendEndpointDoesNotAllocate: a page of endpoints costs the buffer,
// not an allocation per endpoint.
func TestAppendEndpointDoesNotAllocate(t *testing.T) {
	ev := EndpointView{Address: "10.0.0.1:80", Weight: 1, EffectiveWeight: 1, State: "healthy", LastReason: "slow start <done>",
		Since: time.Now(), Requests: 12345}
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = appendEndpoint(buf[:0], "    ", &ev) }); n != 0 {
		t.Errorf("appendEndpoint: %v allocations, want 0", n)
	}
}
