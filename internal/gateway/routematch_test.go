package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Route matching, precedence and rewrites over real sockets (issue 25):
// raw requests to a levee whose routes overlap in host, path kind,
// conditions and methods, each route with its own upstream, so the
// upstream that received a request names the route that won.

// precedenceRoutes are the routes of TestRoutePrecedence, by name; each
// gets its own upstream of the same name.
var precedenceRoutes = []string{
	`{name: health, match: {host: api.test, path: /health}}`,
	`{name: tmpl-int, match: {host: api.test, path_template: "/v1/products/{id:int}"}}`,
	`{name: tmpl-any, match: {host: api.test, path_template: "/v1/products/{slug}"}}`,
	`{name: products, match: {host: api.test, path_prefix: /v1/products}}`,
	`{name: canary, match: {host: api.test, path_prefix: /v1/products, headers: [{name: x-canary, exact: "1"}]}}`,
	`{name: products-post, match: {host: api.test, path_prefix: /v1/products, methods: [POST]}}`,
	`{name: v1, match: {host: api.test, path_prefix: /v1/}}`,
	`{name: images, match: {host: api.test, path_regex: "/img-[0-9]+"}}`,
	`{name: files, match: {host: api.test, path_prefix: /files/}}`,
	`{name: readonly, match: {host: api.test, path: /readonly, methods: [GET, HEAD]}}`,
	`{name: wild, match: {host: "*.test"}}`,
	`{name: wild-eu, match: {host: "*.eu.test", path_prefix: /v1}}`,
	`{name: any, match: {path_prefix: /}}`,
	`{name: any-debug, match: {query: [{name: debug, present: true}]}}`,
	`{name: any-json, match: {path_prefix: /h, headers: [{name: Accept, prefix: application/json}]}}`,
}

type precedenceCase struct {
	method, host, target string
	hdr                  []string // name, value, ...
	want                 string   // the route; "405:<Allow>" for a method mismatch
}

var precedenceCases = []precedenceCase{
	{"GET", "api.test", "/health", nil, "health"},
	{"GET", "api.test", "/health/x", nil, "wild"}, // an exact path only; the host's group has none for it
	{"GET", "api.test", "/v1/products/42", nil, "tmpl-int"},
	{"GET", "api.test", "/v1/products/-7", nil, "tmpl-int"},
	{"GET", "api.test", "/v1/products/99999999999999999999", nil, "tmpl-any"},
	{"GET", "api.test", "/v1/products/shoe", nil, "tmpl-any"},
	{"GET", "api.test", "/v1/products/42", []string{"X-Canary", "1"}, "tmpl-int"}, // the path kind before conditions
	{"POST", "api.test", "/v1/products/42", nil, "tmpl-int"},
	{"GET", "api.test", "/v1/products", nil, "products"},
	{"GET", "api.test", "/v1/products/", nil, "products"},
	{"GET", "api.test", "/v1/products/42/", nil, "products"},
	{"GET", "api.test", "/v1/products/42/reviews", nil, "products"},
	{"GET", "api.test", "/v1/products/42/reviews", []string{"X-Canary", "1"}, "canary"},
	{"GET", "api.test", "/v1/products/42/reviews", []string{"x-canary", "2"}, "products"},
	{"POST", "api.test", "/v1/products/42/reviews", nil, "products-post"},
	{"POST", "api.test", "/v1/products/42/reviews", []string{"X-CANARY", "1"}, "canary"}, // more conditions before methods
	{"GET", "api.test", "/v1/productsXYZ", nil, "v1"},                                    // segment boundaries
	{"GET", "api.test", "/v1/orders", nil, "v1"},
	{"GET", "api.test", "/v1", nil, "wild"},
	{"GET", "API.Test:8080", "/v1/products", nil, "products"},
	{"GET", "api.test.", "/v1/products/7", nil, "tmpl-int"},
	{"GET", "api.test", "/readonly", nil, "readonly"},
	{"HEAD", "api.test", "/readonly", nil, "readonly"},
	{"DELETE", "api.test", "/readonly", nil, "405:GET, HEAD"},
	{"GET", "api.test", "/files/a.png", nil, "files"},
	{"GET", "api.test", "/img-12", nil, "images"},
	{"GET", "api.test", "/img-12/x", nil, "wild"}, // a regex matches the whole path
	{"GET", "api.test", "/img-x", nil, "wild"},
	{"GET", "api.test", "/", nil, "wild"},
	{"GET", "api.test", "/v1/products/../orders", nil, "v1"}, // routed on the normal form
	{"GET", "x.eu.test", "/v1/a", nil, "wild-eu"},
	{"GET", "x.eu.test", "/v1x", nil, "wild"},
	{"GET", "eu.test", "/v1/a", nil, "wild"},
	{"GET", "x.test", "/v1/products/42", nil, "wild"},
	{"GET", "other.example", "/", nil, "any"},
	{"GET", "other.example", "/?debug", nil, "any-debug"},
	{"GET", "other.example", "/x?y=2&debug=1", nil, "any-debug"},
	{"GET", "other.example", "/x?debugger=1", nil, "any"},
	{"GET", "other.example", "/h/1", []string{"Accept", "application/json"}, "any-json"},
	{"GET", "other.example", "/h/1?debug", []string{"Accept", "application/json; charset=utf-8"}, "any-json"}, // /h is longer than /
	{"GET", "other.example", "/h/1", []string{"Accept", "text/html"}, "any"},
	{"GET", "other.example", "/hx", []string{"Accept", "application/json"}, "any"},
}

func TestRoutePrecedence(t *testing.T) {
	if len(precedenceCases) < 30 {
		t.Fatalf("only %d requests", len(precedenceCases))
	}
	ups := map[string]*targetUpstream{}
	var cfg strings.Builder
	cfg.WriteString("listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\nlog: {access: false}\nupstreams:\n")
	names := make([]string, len(precedenceRoutes))
	for i, r := range precedenceRoutes {
		name := strings.TrimSuffix(strings.TrimPrefix(strings.Fields(r)[1], ""), ",")
		names[i] = name
		ups[name] = newTargetUpstream(t)
		fmt.Fprintf(&cfg, "  %s: {endpoints: [{address: %s}]}\n", name, ups[name].addr())
	}
	cfg.WriteString("routes:\n")
	for i, r := range precedenceRoutes {
		fmt.Fprintf(&cfg, "  - %s, upstream: %s}\n", strings.TrimSuffix(r, "}"), names[i])
	}
	h := start(t, cfg.String())
	addr := strings.TrimPrefix(h.base, "http://")

	// GET /api/v1/routes shows each route's match, whatever its kind.
	raw := compactJSON(t, adminGet(t, h, "/api/v1/routes", nil))
	for _, want := range []string{
		`"match":{"host":"api.test","path":"/health"}`,
		`"match":{"host":"api.test","path_template":"/v1/products/{id:int}"}`,
		`"match":{"host":"api.test","path_regex":"/img-[0-9]+"}`,
		`"match":{"host":"api.test","path_prefix":"/v1/products","headers":[{"name":"x-canary","test":"exact","value":"1"}]}`,
		`"match":{"path_prefix":"/","query":[{"name":"debug","test":"present"}]}`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("GET /api/v1/routes lacks %s:\n%s", want, raw)
		}
	}

	for _, c := range precedenceCases {
		before := map[string]int{}
		for n, u := range ups {
			before[n] = len(u.seen())
		}
		resp, body := sendRawHost(t, addr, c.method, c.target, c.host, c.hdr...)
		var got []string
		for n, u := range ups {
			if len(u.seen()) != before[n] {
				got = append(got, n)
			}
		}
		winner := strings.Join(got, "+")
		if resp.StatusCode == http.StatusMethodNotAllowed {
			winner = "405:" + resp.Header.Get("Allow")
		} else if resp.StatusCode != 200 {
			winner = fmt.Sprintf("%d %s", resp.StatusCode, body)
		}
		if winner != c.want {
			t.Errorf("%s %s%s %q: went to %q, want %q", c.method, c.host, c.target, c.hdr, winner, c.want)
		}
	}
}

func compactJSON(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sendRawHost is sendRaw with a Host of the caller's.
func sendRawHost(t *testing.T, addr, method, target, host string, hdr ...string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, host)
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %q: %v", method, target, err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %q: body: %v", method, target, err)
	}
	return resp, string(raw)
}

// TestRouteRewrites: raw requests through routes with rewrites, and what
// the upstream received (target and Host); routing and auth are decided on
// the path as sent (normalised), and a rewrite result that does not
// normalise is refused 400 bad_path (detail rewrite), never forwarded.
func TestRouteRewrites(t *testing.T) {
	up := newTargetUpstream(t)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  data: {endpoints: [{address: %[1]s}]}
routes:
  - {name: strip, match: {path_prefix: /api}, upstream: data, rewrite: {strip_prefix: /api}}
  - {name: keyed, match: {path_prefix: /api/admin}, upstream: data, auth: api_key, rewrite: {strip_prefix: /api}}
  - {name: replace, match: {path_prefix: /v1}, upstream: data, rewrite: {replace_prefix: /internal/v2}}
  - {name: replace-slash, match: {path_prefix: /s/}, upstream: data, rewrite: {replace_prefix: /t/}}
  - {name: swap, match: {path_template: "/r/{a}/{b}"}, upstream: data, rewrite: {path_regex: {pattern: "^/r/([^/]+)/([^/]+)$", substitution: "/$2/$1"}}}
  - {name: climb, match: {path_prefix: /climb}, upstream: data, rewrite: {path_regex: {pattern: "^/climb/(.*)$", substitution: "/x/../../$1"}}}
  - {name: nul, match: {path_prefix: /nul}, upstream: data, rewrite: {path_regex: {pattern: "^/nul/(.*)$", substitution: "/%%00/$1"}}}
  - {name: host, match: {path_prefix: /host}, upstream: data, rewrite: {host: "backend.internal:8080"}}
  - {name: all, match: {path_prefix: /}, upstream: data}
apps:
  - {id: good, api_key_sha256: [%[2]s], grants: [keyed]}
`, up.addr(), keyHash(goodKey)))
	addr := strings.TrimPrefix(h.base, "http://")
	raw := compactJSON(t, adminGet(t, h, "/api/v1/routes", nil))
	for _, want := range []string{
		`"rewrite":{"strip_prefix":"/api"}`,
		`"rewrite":{"replace_prefix":"/internal/v2"}`,
		`"rewrite":{"path_regex":"^/r/([^/]+)/([^/]+)$","substitution":"/$2/$1"}`,
		`"rewrite":{"host":"backend.internal:8080"}`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("GET /api/v1/routes lacks %s:\n%s", want, raw)
		}
	}
	tests := []struct {
		target string
		key    bool
		status int
		fwd    string // what the upstream received, or the refusal's reason and detail
		host   string // the Host it received, when not other.example
	}{
		{"/api/users/1?x=1", false, 200, "/users/1?x=1", ""},
		{"/api", false, 200, "/", ""},
		{"/api/", false, 200, "/", ""},
		{"/apix/1", false, 200, "/apix/1", ""}, // not the api route: no rewrite
		{"/api/x/../users", false, 200, "/users", ""},
		{"/api/../admin/x", false, 200, "/admin/x", ""}, // normalised first: route all, not rewritten
		{"/api/admin/x", false, 401, "unauthenticated missing_credentials", ""},
		{"/api/x/../admin/x", false, 401, "unauthenticated missing_credentials", ""}, // the keyed route decides on the path as sent
		{"/api/admin/x", true, 200, "/admin/x", ""},
		{"/api/admin%2Fx", false, 400, "bad_path", ""},
		{"/api/admin;x/x", false, 400, "bad_path", ""},
		{"/v1/a?q", false, 200, "/internal/v2/a?q", ""},
		{"/v1", false, 200, "/internal/v2", ""},
		{"/v1x", false, 200, "/v1x", ""},
		{"/s/a/b", false, 200, "/t/a/b", ""},
		{"/r/one/two", false, 200, "/two/one", ""},
		{"/r/caf%C3%A9/x%20y", false, 200, "/x%20y/caf%C3%A9", ""},
		{"/climb/etc/passwd", false, 200, "/etc/passwd", ""}, // ".." above the root stops at the root
		{"/nul/a", false, 400, "bad_path rewrite", ""},
		{"/host/a", false, 200, "/host/a", "backend.internal:8080"},
	}
	for _, tc := range tests {
		before := len(up.seen())
		var hdr []string
		if tc.key {
			hdr = []string{"X-Api-Key", goodKey}
		}
		resp, body := sendRaw(t, addr, http.MethodGet, tc.target, hdr...)
		if resp.StatusCode != tc.status {
			t.Errorf("%q: status %d (%q), want %d", tc.target, resp.StatusCode, body, tc.status)
			continue
		}
		if tc.status != 200 {
			var r struct{ Reason, Detail string }
			_ = json.Unmarshal([]byte(body), &r)
			if got := strings.TrimSpace(r.Reason + " " + r.Detail); got != tc.fwd {
				t.Errorf("%q: refused %q, want %q", tc.target, got, tc.fwd)
			}
			if len(up.seen()) != before {
				t.Errorf("%q: refused, but the upstream got a request", tc.target)
			}
			continue
		}
		if body != tc.fwd {
			t.Errorf("%q: upstream received %q, want %q", tc.target, body, tc.fwd)
		}
		wantHost := tc.host
		if wantHost == "" {
			wantHost = "other.example"
		}
		if got := resp.Header.Get("X-Seen-Host"); got != wantHost {
			t.Errorf("%q: upstream Host %q, want %q", tc.target, got, wantHost)
		}
	}
}
