package config

import "testing"

// mirrorRoute is a route on upstream video, with a second upstream shadow
// declared, and the given extra lines (each indented four spaces).
func mirrorRoute(extra string) string {
	return head + upstreams + "  shadow:\n    endpoints:\n      - address: 10.0.0.2:80\n" +
		"routes:\n  - name: api\n    upstream: video\n" + extra
}

// rejectsMirror are TestParseRejects' cases of a route's mirror.
var rejectsMirror = []rejectCase{
	{"mirror to the route's own upstream", mirrorRoute("    mirror: {upstream: video}\n"), []string{
		`routes[0].mirror.upstream: must differ from the route's upstream, got "video"`,
	}},
	{"mirror to an unknown upstream", mirrorRoute("    mirror: {upstream: shadw}\n"), []string{
		`routes[0].mirror.upstream: unknown upstream "shadw" (did you mean "shadow"?)`,
	}},
	{"mirror without upstream", mirrorRoute("    mirror: {percent: 5}\n"), []string{
		`routes[0].mirror.upstream: required`,
	}},
	{"mirror percent 0", mirrorRoute("    mirror: {upstream: shadow, percent: 0}\n"), []string{
		`routes[0].mirror.percent: must be a number from 0.01 to 100, got 0`,
	}},
	{"mirror percent over 100", mirrorRoute("    mirror: {upstream: shadow, percent: 100.5}\n"), []string{
		`routes[0].mirror.percent: must be a number from 0.01 to 100, got 100.5`,
	}},
	{"mirror percent finer than 0.01", mirrorRoute("    mirror: {upstream: shadow, percent: 12.345}\n"), []string{
		`routes[0].mirror.percent: must be a multiple of 0.01 (one request in 10000), got 12.345`,
	}},
	{"mirror max_in_flight 0", mirrorRoute("    mirror: {upstream: shadow, max_in_flight: 0}\n"), []string{
		`routes[0].mirror.max_in_flight: must be a number from 1 to 10000, got 0`,
	}},
	{"mirror timeout too short", mirrorRoute("    mirror: {upstream: shadow, timeout: 1ms}\n"), []string{
		`routes[0].mirror.timeout: must be from 10ms to 1m0s, got "1ms"`,
	}},
	{"mirror unknown field", mirrorRoute("    mirror: {upstream: shadow, percentage: 5}\n"), []string{
		`routes[0].mirror.percentage: unknown field`,
	}},
	{"mirror on a respond route", head + upstreams + "  shadow:\n    endpoints:\n      - address: 10.0.0.2:80\n" +
		"routes:\n  - name: api\n    respond: {body: hi}\n    mirror: {upstream: shadow}\n", []string{
		`routes[0].mirror: only a route with an upstream is mirrored, this one has respond`,
	}},
}

// TestMirrorPerTenThousand: percent to requests of every 10000.
func TestMirrorPerTenThousand(t *testing.T) {
	for _, tt := range []struct {
		percent float64
		want    int
	}{{100, 10000}, {0.01, 1}, {12.5, 1250}, {33.33, 3333}, {0.29, 29}} {
		if got := (&RouteMirror{Percent: tt.percent}).MirrorPerTenThousand(); got != tt.want {
			t.Errorf("percent %v: %d of 10000, want %d", tt.percent, got, tt.want)
		}
	}
}
