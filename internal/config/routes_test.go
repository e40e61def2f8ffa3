package config

import (
	"strings"
	"testing"
)

// rejectsRoutes are TestParseRejects' cases of the routes block.
var rejectsRoutes = []rejectCase{
	{"duplicate key", head + upstreams + `routes:
  - name: api
    match:
      host: a.example.com
      host: b.example.com
    upstream: video
`, []string{
		"routes[0].match.host: duplicate key (first at line 10)",
	}},
	{"route naming a missing upstream", head + upstreams + "routes:\n  - name: api\n    upstream: vidoe\n", []string{
		`routes[0].upstream: unknown upstream "vidoe" (did you mean "video"?)`,
	}},
	{"duplicate route name", head + upstreams + routes + "  - name: api\n    match: {path_prefix: /v2}\n    upstream: video\n", []string{
		`routes[1].name: duplicate route name "api" (first at routes[0])`,
	}},
	{"bad route name", head + upstreams + "routes:\n  - name: API v1\n    upstream: video\n", []string{
		`routes[0].name: must be 1 to 64 characters from a-z, 0-9, "_", "." and "-", got "API v1"`,
	}},
	{"route name too long", head + upstreams + "routes:\n  - name: " + strings.Repeat("a", 65) + "\n    upstream: video\n", []string{
		`routes[0].name: must be 1 to 64 characters from a-z, 0-9, "_", "." and "-", got "` + strings.Repeat("a", 64) + `…"`,
	}},
	{"route missing name and upstream", head + upstreams + routes + "  - match: {path_prefix: /v2}\n", []string{
		"routes[1].name: required",
		"routes[1].upstream: required unless split, data, redirect or respond is set",
	}},
	{"null route", head + upstreams + routes + "  - ~\n", []string{
		"routes[1]: must be a mapping with name, match and upstream, got null",
	}},
	{"empty routes", head + upstreams + "routes: []\n", []string{
		"routes: at least one route is required",
	}},
	{"mapping where a sequence is expected", head + upstreams + "routes:\n  api:\n    upstream: video\n", []string{
		"routes: must be a sequence, got a mapping",
	}},
	{"path_prefix without slash", head + upstreams + "routes:\n  - name: api\n    match: {path_prefix: api}\n    upstream: video\n", []string{
		`routes[0].match.path_prefix: must start with "/", got "api"`,
	}},
	{"path_prefix with query", head + upstreams + "routes:\n  - name: api\n    match: {path_prefix: \"/api?x=1\"}\n    upstream: video\n", []string{
		`routes[0].match.path_prefix: must not contain "?" or "#", got "/api?x=1"`,
	}},
	{"bad method token", head + upstreams + "routes:\n  - name: api\n    match: {methods: [GET, \"GE T\", \"\"]}\n    upstream: video\n", []string{
		`routes[0].match.methods[1]: must be an HTTP method such as "GET", got "GE T"`,
		`routes[0].match.methods[2]: must be an HTTP method such as "GET", got ""`,
	}},
	{"duplicate method", head + upstreams + "routes:\n  - name: api\n    match:\n      methods: [get, POST, GET]\n    upstream: video\n", []string{
		`routes[0].match.methods[2]: duplicate method "GET" (first at methods[0])`,
	}},
	{"empty methods", head + upstreams + "routes:\n  - name: api\n    match: {methods: []}\n    upstream: video\n", []string{
		"routes[0].match.methods: must list at least one method; omit it to match any method",
	}},
	{"wildcard in the middle", head + upstreams + "routes:\n  - name: api\n    match: {host: a.*.com}\n    upstream: video\n", []string{
		`routes[0].match.host: wildcard must be the whole leftmost label, as in "*.example.com", got "a.*.com"`,
	}},
	{"bad hosts", head + upstreams + `routes:
  - {name: a, match: {host: "*"}, upstream: video}
  - {name: b, match: {host: "*.*.example.com"}, upstream: video}
  - {name: c, match: {host: "api.example.com:443"}, upstream: video}
  - {name: d, match: {host: "api..example.com"}, upstream: video}
  - {name: e, match: {host: "*a.example.com"}, upstream: video}
`, []string{
		`routes[0].match.host: wildcard must be the whole leftmost label, as in "*.example.com", got "*"`,
		`routes[1].match.host: wildcard must be the whole leftmost label, as in "*.example.com", got "*.*.example.com"`,
		`routes[2].match.host: must be a host name or IPv4 address without a port, got "api.example.com:443"`,
		`routes[3].match.host: must be a host name such as "api.example.com" or "*.example.com", got "api..example.com"`,
		`routes[4].match.host: wildcard must be the whole leftmost label, as in "*.example.com", got "*a.example.com"`,
	}},
	{"duplicate route match", head + upstreams + `routes:
  - {name: a, match: {host: x.example.com, path_prefix: /v1}, upstream: video}
  - {name: b, match: {host: y.example.com, path_prefix: /v1}, upstream: video}
  - {name: c, match: {host: X.example.com, path_prefix: /v1}, upstream: video}
  - {name: d, upstream: video}
  - {name: e, match: {path_prefix: /}, upstream: video}
`, []string{
		"routes[2].match: duplicates routes[0] (same host and path_prefix)",
		"routes[4].match: duplicates routes[3] (same host and path_prefix)",
	}},
	{"overlapping methods", head + upstreams + `routes:
  - {name: a, match: {path_prefix: /v1, methods: [GET, HEAD]}, upstream: video}
  - {name: b, match: {path_prefix: /v1, methods: [POST]}, upstream: video}
  - {name: c, match: {path_prefix: /v1, methods: [put, post, head]}, upstream: video}
`, []string{
		`routes[2].match: duplicates routes[0] (same host, path_prefix and method "HEAD")`,
	}},
	{"size with unknown unit", head + upstreams + "routes:\n  - name: api\n    upstream: video\n    max_body_bytes: 10 parsecs\n", []string{
		`routes[0].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "10 parsecs"`,
	}},
	{"size forms refused", head + upstreams + `routes:
  - {name: a, upstream: video, match: {path_prefix: /a}, max_body_bytes: -1}
  - {name: b, upstream: video, match: {path_prefix: /b}, max_body_bytes: "1.5MiB"}
  - {name: c, upstream: video, match: {path_prefix: /c}, max_body_bytes: "100"}
  - {name: d, upstream: video, match: {path_prefix: /d}, max_body_bytes: 1.5}
  - {name: e, upstream: video, match: {path_prefix: /e}, max_body_bytes: "9999999TiB"}
  - {name: f, upstream: video, match: {path_prefix: /f}, max_body_bytes: "10mib"}
`, []string{
		`routes[0].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got -1`,
		`routes[1].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "1.5MiB"`,
		`routes[2].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "100"`,
		`routes[3].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got 1.5`,
		`routes[4].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "9999999TiB"`,
		`routes[5].max_body_bytes: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "10mib"`,
	}},
	{"route retry empty on", head + upstreams + routes + "    retry: {on: []}\n", []string{
		"routes[0].retry.on: must list at least one condition; set attempts: 1 to disable retries on this route",
	}},
	{"route retry budget", head + upstreams + routes + "    retry:\n      budget: {ratio: 0.5}\n  - name: b\n    match: {path_prefix: /b}\n    upstream: Bad Name\n    retry: {budget: ~}\n", []string{
		"routes[0].retry.budget: budget is per upstream; set it under upstreams.video.retry",
		`routes[1].upstream: unknown upstream "Bad Name"`,
		"routes[1].retry.budget: budget is per upstream; set it under upstreams.NAME.retry",
	}},
	{"route priority", head + upstreams + routes + "    priority: high\n  - {name: b, match: {path_prefix: /b}, upstream: video, priority: Critical}\n  - {name: c, match: {path_prefix: /c}, upstream: video, priority: 1}\n  - {name: d, match: {path_prefix: /d}, upstream: video, priorty: normal}\n", []string{
		`routes[0].priority: must be one of "critical", "normal", "sheddable", got "high"`,
		`routes[1].priority: must be one of "critical", "normal", "sheddable", got "Critical"`,
		"routes[2].priority: must be a string, got 1",
		`routes[3].priorty: unknown field (did you mean "priority"?)`,
	}},
}

func TestNormalizeMatchHost(t *testing.T) {
	tests := []struct{ in, want, problem string }{
		{"API.Example.com", "api.example.com", ""},
		{"*.Example.COM", "*.example.com", ""},
		{"*.com", "*.com", ""},
		{"192.0.2.1", "192.0.2.1", ""},
		{"", "", ""},
		{"*", "*", `wildcard must be the whole leftmost label, as in "*.example.com"`},
		{"*.192.0.2.1", "*.192.0.2.1", `must be a host name such as "api.example.com" or "*.example.com"`},
		{"example.com.", "example.com.", `must be a host name such as "api.example.com" or "*.example.com"`},
		{"[::1]", "[::1]", "must be a host name or IPv4 address without a port"},
	}
	for _, tt := range tests {
		got, problem := normalizeMatchHost(tt.in)
		if got != tt.want || problem != tt.problem {
			t.Errorf("normalizeMatchHost(%q) = %q, %q; want %q, %q", tt.in, got, problem, tt.want, tt.problem)
		}
	}
}
