package config

import (
	"slices"
	"strings"
	"testing"
)

// rejectsRouteMatch are TestParseRejects' cases of `match`'s path kinds
// and conditions, and of the precedence ties refused across routes.
var rejectsRouteMatch = []rejectCase{
	{"two path kinds", head + upstreams + `routes:
  - {name: a, match: {path: /a, path_prefix: /a}, upstream: video}
  - {name: b, match: {path_template: "/b/{id}", path_regex: "/b/.*"}, upstream: video}
`, []string{
		`routes[0].match.path_prefix: a route matches one of path, path_prefix, path_template and path_regex, got path and path_prefix`,
		`routes[1].match.path_regex: a route matches one of path, path_prefix, path_template and path_regex, got path_template and path_regex`,
	}},
	{"bad path kinds", head + upstreams + `routes:
  - {name: a, match: {path: a}, upstream: video}
  - {name: b, match: {path_template: "/b/{id:uuid}"}, upstream: video}
  - {name: c, match: {path_template: "/b/x{id}"}, upstream: video}
  - {name: d, match: {path_regex: "/b/(x"}, upstream: video}
  - {name: e, match: {path_regex: "` + strings.Repeat("a", 1025) + `"}, upstream: video}
`, []string{
		`routes[0].match.path: must start with "/", got "a"`,
		`routes[1].match.path_template: segment "{id:uuid}": unknown capture type "uuid" (the only type is int), got "/b/{id:uuid}"`,
		`routes[2].match.path_template: segment "x{id}": a capture must be a whole segment such as {id}, got "/b/x{id}"`,
		"routes[3].match.path_regex: must be an RE2 pattern of at most 1 KiB: error parsing regexp: missing closing ): `/b/(x`, got \"/b/(x\"",
		`routes[4].match.path_regex: must be an RE2 pattern of at most 1 KiB: must be at most 1024 bytes, got "` + strings.Repeat("a", 64) + `…"`,
	}},
	{"bad conditions", head + upstreams + `routes:
  - name: a
    upstream: video
    match:
      headers:
        - {name: "X Bad", exact: "1"}
        - {name: X-A}
        - {name: X-A, exact: "1", prefix: "2"}
        - {name: X-A, present: false}
        - {name: X-A, exact: ""}
        - {name: X-A, regex: "(("}
        - {exact: "1"}
      query:
        - {name: "", present: true}
        - {name: q, absent: false}
`, []string{
		`routes[0].match.headers[0].name: must be a header name such as "X-Canary", got "X Bad"`,
		`routes[0].match.headers[1]: must have exactly one of exact, prefix, regex, present and absent, got 0`,
		`routes[0].match.headers[2]: must have exactly one of exact, prefix, regex, present and absent, got 2`,
		`routes[0].match.headers[3].present: must be true (for the opposite test, use absent: true)`,
		`routes[0].match.headers[4].exact: must not be empty (to test presence, use present: true)`,
		"routes[0].match.headers[5].regex: must be an RE2 pattern of at most 1 KiB: error parsing regexp: missing closing ): `((`, got \"((\"",
		`routes[0].match.headers[6].name: required`,
		`routes[0].match.query[0].name: required`,
		`routes[0].match.query[1].absent: must be true (for the opposite test, use present: true)`,
	}},
	{"too many conditions", head + upstreams + "routes:\n  - name: a\n    upstream: video\n    match:\n      headers:\n" + strings.Repeat("        - {name: X-A, present: true}\n", 17), []string{
		`routes[0].match.headers: at most 16 conditions, got 17`,
	}},
	{"ambiguous pairs", head + upstreams + `routes:
  - {name: t1, match: {host: a.test, path_template: "/p/{id}", methods: [GET]}, upstream: video}
  - {name: t2, match: {host: A.test, path_template: "/p/{name}", methods: [POST, GET]}, upstream: video}
  - {name: t3, match: {host: a.test, path_template: "/p/{id:int}", methods: [GET]}, upstream: video}
  - {name: h1, match: {path: /e, headers: [{name: x-a, exact: "1"}, {name: Accept, present: true}]}, upstream: video}
  - {name: h2, match: {path: /e, headers: [{name: ACCEPT, present: true}, {name: X-A, exact: "1"}]}, upstream: video}
  - {name: h3, match: {path: /e, headers: [{name: X-A, exact: "1"}]}, upstream: video}
  - {name: r1, match: {path_regex: "/r/.*"}, upstream: video}
  - {name: r2, match: {path_regex: "/r/.*"}, upstream: video}
  - {name: q1, match: {path_prefix: /q, query: [{name: v, exact: "1"}], methods: [GET]}, upstream: video}
  - {name: q2, match: {path_prefix: /q, query: [{name: v, exact: "1"}], methods: [GET]}, upstream: video}
`, []string{
		`routes[1].match: duplicates routes[0] (same host, path_template and method "GET")`,
		`routes[4].match: duplicates routes[3] (same host, path and conditions)`,
		`routes[7].match: duplicates routes[6] (same host and path_regex)`,
		`routes[9].match: duplicates routes[8] (same host, path_prefix, conditions and method "GET")`,
	}},
}

// rejectsRewrite are TestParseRejects' cases of `rewrite`.
var rejectsRewrite = []rejectCase{
	{"bad rewrites", head + upstreams + `routes:
  - {name: a, match: {path_prefix: /a}, upstream: video, rewrite: {strip_prefix: /a, replace_prefix: /b}}
  - {name: b, match: {path: /b}, upstream: video, rewrite: {replace_prefix: /c}}
  - {name: c, match: {path_prefix: /c, raw_path: true}, upstream: video, rewrite: {strip_prefix: /c}}
  - {name: d, match: {path_prefix: /d}, upstream: video, rewrite: {strip_prefix: "/d/../e"}}
  - {name: e, match: {path_prefix: /e}, upstream: video, rewrite: {path_regex: {pattern: "((", substitution: /x}}}
  - {name: f, match: {path_prefix: /f}, upstream: video, rewrite: {path_regex: {pattern: "^/f"}}}
  - {name: g, match: {path_prefix: /g}, upstream: video, rewrite: {host: "bad host"}}
  - {name: h, match: {path_prefix: /h}, upstream: video, rewrite: {host: "h.internal:99999"}}
  - {name: i, match: {path_prefix: /i}, upstream: video, rewrite: {}}
`, []string{
		`routes[0].rewrite.replace_prefix: a rewrite changes the path one way: one of strip_prefix, replace_prefix and path_regex, got strip_prefix and replace_prefix`,
		`routes[1].rewrite.replace_prefix: needs the route's match.path_prefix (the prefix it replaces), got match.path`,
		`routes[2].rewrite.strip_prefix: not with match.raw_path: a raw path is forwarded as sent`,
		`routes[3].rewrite.strip_prefix: must be a normal path: no "//", "." or ".." segment, got "/d/../e"`,
		"routes[4].rewrite.path_regex.pattern: must be an RE2 pattern of at most 1 KiB: error parsing regexp: missing closing ): `((`, got \"((\"",
		`routes[5].rewrite.path_regex.substitution: required`,
		`routes[6].rewrite.host: must be a host name such as "api.internal" or an IP address, optionally with ":port", got "bad host"`,
		`routes[7].rewrite.host: must have a port from 1 to 65535, got "h.internal:99999"`,
		`routes[8].rewrite: must set at least one of strip_prefix, replace_prefix, path_regex and host`,
	}},
}

func TestParseMatchKinds(t *testing.T) {
	cfg, err := Parse([]byte(head + upstreams + `routes:
  - {name: exact, match: {path: /v1/health}, upstream: video}
  - {name: tmpl, match: {path_template: "/v1/products/{id:int}"}, upstream: video}
  - {name: re, match: {path_regex: "/v1/.*\\.json", headers: [{name: x-canary, exact: "1"}], query: [{name: debug, present: true}]}, upstream: video}
  - {name: prefix, match: {path_prefix: /v1/products}, upstream: video}
  - {name: all, upstream: video}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := func(i int) *Match { return &cfg.Routes[i].Match }
	if m := got(0); m.Path != "/v1/health" || m.Prefix() != "" || m.PathKind() != "path" {
		t.Errorf("exact: %+v", m)
	}
	if m := got(1); m.PathTemplate != "/v1/products/{id:int}" || m.Prefix() != "" || m.PathPrefix != "/" || m.PathKind() != "path_template" {
		t.Errorf("template: %+v", m)
	}
	h, q := got(2).Conds()
	if m := got(2); m.PathRegex != `/v1/.*\.json` || m.Prefix() != "" || len(h) != 1 || h[0].Value != "1" || len(q) != 1 || q[0].Name != "debug" {
		t.Errorf("regex: %+v, %+v, %+v", m, h, q)
	}
	if m := got(3); m.PathPrefix != "/v1/products" || m.PathKind() != "path_prefix" {
		t.Errorf("prefix: %+v", m)
	}
	if m := got(4); m.PathPrefix != "/" || !slices.Equal([]string{m.Path, m.PathTemplate, m.PathRegex}, []string{"", "", ""}) {
		t.Errorf("default: %+v", m)
	}
}

// TestDataRouteMatch: a data route's path_template captures are declared
// parameters of its SQL; a table-mode route takes none; two data routes on
// one path tie (a data route's path_prefix is matched exactly), while an
// upstream route with the same prefix does not.
func TestDataRouteMatch(t *testing.T) {
	_, err := Parse([]byte(dataYAML(t, `  - name: one
    match: {path_template: "/v1/orders/{id:int}"}
    data: {source: sales, sql: "SELECT id FROM orders WHERE id = :id", params: {id: {type: int64, required: true}}}
  - name: bad-capture
    match: {path_template: "/v2/orders/{order}"}
    data: {source: sales, sql: "SELECT id FROM orders WHERE id = :id", params: {id: {type: int64, required: true}}}
  - name: table-capture
    match: {path_template: "/v2/customers/{id}"}
    data: {source: local, table: customers, columns: [id]}
  - name: orders-again
    match: {path_prefix: /v1/orders, methods: [GET]}
    data: {source: local, table: customers, columns: [id]}
`)))
	want := []string{
		`routes[3].match.path_template: capture "order" must be a parameter declared in data.params`,
		`routes[4].match.path_template: a table-mode data route takes no capture ("id"); use a sql route with params`,
		`routes[5].match: duplicates routes[0] (same host, path_prefix and method "GET")`,
	}
	got := ""
	if err != nil {
		got = err.Error()
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
	if strings.Count(got, "\n") != len(want)-1 {
		t.Errorf("want %d errors, got:\n%s", len(want), got)
	}
}
