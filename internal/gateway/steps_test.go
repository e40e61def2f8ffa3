package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// headerUpstream is a real upstream that records each request's path and
// headers and answers with a few headers of its own (Server, Cache-Control,
// X-Up, a Vary and its own CORS header), to be changed by levee.
type headerUpstream struct {
	srv  *httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	seen []upstreamSaw
}

type upstreamSaw struct {
	Method, Path string
	Header       http.Header
}

func newHeaderUpstream(t *testing.T) *headerUpstream {
	u := &headerUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, upstreamSaw{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone()})
		u.mu.Unlock()
		h := w.Header()
		h.Set("Server", "upstream/1.0")
		h.Set("Cache-Control", "max-age=60")
		h.Set("X-Up", "up")
		h.Set("Vary", "Accept-Encoding")
		h.Set("Access-Control-Allow-Origin", "https://upstream-chose.example")
		h.Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// last is the request the upstream saw last.
func (u *headerUpstream) last(t *testing.T) upstreamSaw {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	return u.seen[len(u.seen)-1]
}

func stepsConfig(up string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  web: {endpoints: [{address: %s}]}
routes:
  - name: api
    match: {path_prefix: /api}
    upstream: web
    max_body_bytes: 4
    headers:
      request:
        set: {X-Env: prod, X-Client: "${client_ip} via ${route} id ${request_id}", X-App: "app=${app}", X-Host: "${host}", X-Cert: "[${tls_client_subject}]"}
        add: {X-Tag: levee}
        remove: [X-Debug, Cookie]
      response:
        set: {Cache-Control: no-store}
        add: {X-Via: "levee ${route}"}
        remove: [Server]
  - name: keyed
    match: {path_prefix: /keyed}
    upstream: web
    auth: api_key
    headers:
      request:
        set: {X-Caller: "${app}"}
  - name: plain
    match: {path_prefix: /plain}
    upstream: web
apps:
  - {id: good, api_key_sha256: [%s], grants: [keyed]}
`, up, keyHash(goodKey))
}

// TestRouteHeaderChanges (issue 25 item 3): raw requests through a real
// levee; what the upstream received (set replaces, add appends, remove
// deletes, variables expanded) and what the client got (the upstream's
// answer changed; levee's own refusal not).
func TestRouteHeaderChanges(t *testing.T) {
	up := newHeaderUpstream(t)
	h := start(t, stepsConfig(hostPort(up.srv)))
	addr := strings.TrimPrefix(h.base, "http://")

	resp, _ := sendRaw(t, addr, "GET", "/api/x?q=1", "X-Env", "dev", "X-Tag", "client", "X-Debug", "1", "Cookie", "s=1", "X-Keep", "k")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := up.last(t)
	reqID := resp.Header.Get("X-Request-Id")
	for _, c := range []struct {
		name string
		want []string // nil: absent
	}{
		{"X-Env", []string{"prod"}},                             // set replaces the client's
		{"X-Client", []string{"127.0.0.1 via api id " + reqID}}, // variables
		{"X-App", []string{"app="}},                             // no app on a route without auth
		{"X-Host", []string{"other.example"}},                   // the request's host
		{"X-Cert", []string{"[]"}},                              // no client certificate
		{"X-Tag", []string{"client", "levee"}},                  // add appends
		{"X-Debug", nil},                                        // removed
		{"Cookie", nil},                                         // removed
		{"X-Keep", []string{"k"}},                               // untouched
		{"X-Request-Id", []string{reqID}},                       // levee's own, unchanged
		{"X-Forwarded-For", []string{up.last(t).Header.Get("X-Forwarded-For")}}, // present, levee's
	} {
		if v := got.Header.Values(c.name); !slices.Equal(v, c.want) {
			t.Errorf("upstream got %s = %q, want %q", c.name, v, c.want)
		}
	}
	if got.Path != "/api/x?q=1" {
		t.Errorf("upstream got path %q", got.Path)
	}
	for _, c := range []struct {
		name string
		want []string
	}{
		{"Cache-Control", []string{"no-store"}}, // set replaces the upstream's
		{"X-Via", []string{"levee api"}},        // add, expanded
		{"Server", nil},                         // removed
		{"X-Up", []string{"up"}},                // untouched
	} {
		if v := resp.Header.Values(c.name); !slices.Equal(v, c.want) {
			t.Errorf("client got %s = %q, want %q", c.name, v, c.want)
		}
	}

	// The app variable on a route with auth: the app's id, after auth.
	resp, _ = sendRaw(t, addr, "GET", "/keyed/1", "X-Api-Key", goodKey, "X-Caller", "forged")
	if resp.StatusCode != 200 {
		t.Fatalf("keyed: status %d", resp.StatusCode)
	}
	if v := up.last(t).Header.Values("X-Caller"); !slices.Equal(v, []string{"good"}) {
		t.Errorf("keyed: upstream got X-Caller %q, want [good]", v)
	}

	// levee's own refusal (413, body over max_body_bytes) is not changed.
	before := up.hits.Load()
	resp, err := h.client.Post(h.base+"/api/x", "text/plain", strings.NewReader("0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: status %d", resp.StatusCode)
	}
	if resp.Header.Get("X-Via") != "" || resp.Header.Get("Cache-Control") == "no-store" {
		t.Errorf("a refusal got the route's response changes: %v", resp.Header)
	}
	if up.hits.Load() != before {
		t.Error("the refused request reached the upstream")
	}

	// A route without changes passes both ways untouched.
	resp, _ = sendRaw(t, addr, "GET", "/plain", "X-Debug", "1")
	if v := up.last(t).Header.Get("X-Debug"); v != "1" || resp.Header.Get("Server") != "upstream/1.0" {
		t.Errorf("plain route: upstream X-Debug %q, client Server %q", v, resp.Header.Get("Server"))
	}
}

func directConfig(up string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  web: {endpoints: [{address: %s}]}
routes:
  - {name: moved, match: {path_prefix: /old}, redirect: {to: "/new${path}"}}
  - {name: s301, match: {path_prefix: /s/301}, redirect: {to: /t, status: 301}}
  - {name: s302, match: {path_prefix: /s/302}, redirect: {to: /t, status: 302}}
  - {name: s303, match: {path_prefix: /s/303}, redirect: {to: /t, status: 303}}
  - {name: s307, match: {path_prefix: /s/307}, redirect: {to: /t, status: 307}}
  - {name: s308, match: {path_prefix: /s/308}, redirect: {to: /t, status: 308}}
  - {name: secure, match: {path_prefix: /secure}, redirect: {https: true}}
  - {name: secure-strip, match: {path_prefix: /bare}, redirect: {https: true, strip_query: true, status: 302}}
  - {name: away, match: {path_prefix: /away}, redirect: {to: "https://new.example.com${path}", status: 308}}
  - {name: fixed-query, match: {path_prefix: /fq}, redirect: {to: "/landing?from=fq"}}
  - name: robots
    match: {path_prefix: /robots.txt}
    respond: {body: "User-agent: *\nDisallow: /private\n"}
    headers: {response: {set: {Cache-Control: "max-age=3600"}}}
  - {name: down, match: {path_prefix: /maintenance}, respond: {status: 503, body: '{"down":true}', content_type: application/json}}
  - {name: gone, match: {path_prefix: /gone}, respond: {status: 204}}
  - {name: limited, match: {path_prefix: /limited}, respond: {body: ok}, anonymous_limits: {rate: 0.01, burst: 1}}
  - {name: keyed, match: {path_prefix: /keyed}, respond: {body: secret}, auth: api_key}
  - {name: rest, match: {path_prefix: /}, upstream: web}
apps:
  - {id: good, api_key_sha256: [%s], grants: [keyed]}
`, up, keyHash(goodKey))
}

// TestRedirectAndRespond (issue 25 item 4): each redirect status, https,
// strip_query, an absolute target, request bytes that try to split the
// Location or make it point at another site; fixed answers with their
// body and content type (robots.txt, a maintenance page, a 204); and
// these routes behind their auth and limits. None reaches the upstream.
func TestRedirectAndRespond(t *testing.T) {
	up := newHeaderUpstream(t)
	h := start(t, directConfig(hostPort(up.srv)))
	addr := strings.TrimPrefix(h.base, "http://")

	for _, c := range []struct {
		method, target string
		status         int
		location       string
	}{
		{"GET", "/old/a/b?x=1", 301, "/new/old/a/b?x=1"},
		{"POST", "/old", 301, "/new/old"},
		{"GET", "/s/301", 301, "/t"},
		{"GET", "/s/302", 302, "/t"},
		{"GET", "/s/303?q", 303, "/t?q"},
		{"GET", "/s/307", 307, "/t"},
		{"GET", "/s/308", 308, "/t"},
		{"GET", "/secure/p?q=1", 301, "https://other.example/secure/p?q=1"},
		{"GET", "/bare/p?q=1", 302, "https://other.example/bare/p"},
		{"GET", "/away/x?y=2", 308, "https://new.example.com/away/x?y=2"},
		{"GET", "/fq/x?y=2", 301, "/landing?from=fq"},
		// Request bytes cannot split the header or leave the site.
		{"GET", "/old/%0d%0aSet-Cookie:%20a=b", 301, "/new/old/%0D%0ASet-Cookie:%20a=b"},
		{"GET", "/secure//evil.example/x", 301, "https://other.example/secure/evil.example/x"},
	} {
		resp, body := sendRaw(t, addr, c.method, c.target)
		if resp.StatusCode != c.status || resp.Header.Get("Location") != c.location {
			t.Errorf("%s %s: %d Location %q, want %d %q", c.method, c.target, resp.StatusCode, resp.Header.Get("Location"), c.status, c.location)
		}
		if body != "" || resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("%s %s: body %q, Set-Cookie %q", c.method, c.target, body, resp.Header.Get("Set-Cookie"))
		}
	}

	for _, c := range []struct {
		method, target string
		status         int
		ctype, body    string
		cache          string
	}{
		{"GET", "/robots.txt", 200, "text/plain; charset=utf-8", "User-agent: *\nDisallow: /private\n", "max-age=3600"},
		{"HEAD", "/robots.txt", 200, "text/plain; charset=utf-8", "", "max-age=3600"},
		{"GET", "/maintenance/x", 503, "application/json", `{"down":true}`, ""},
		{"GET", "/gone", 204, "text/plain; charset=utf-8", "", ""},
	} {
		var resp *http.Response
		var body string
		if c.method == http.MethodHead { // sendRaw reads a body by its Content-Length
			var err error
			if resp, err = h.client.Head(h.base + c.target); err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(raw)
		} else {
			resp, body = sendRaw(t, addr, c.method, c.target)
		}
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != c.ctype || body != c.body || resp.Header.Get("Cache-Control") != c.cache {
			t.Errorf("%s %s: %d %q %q cache %q, want %d %q %q %q", c.method, c.target, resp.StatusCode,
				resp.Header.Get("Content-Type"), body, resp.Header.Get("Cache-Control"), c.status, c.ctype, c.body, c.cache)
		}
	}

	// Behind the route's limits and auth.
	if resp, body := sendRaw(t, addr, "GET", "/limited"); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("limited, first: %d %q", resp.StatusCode, body)
	}
	expectRefusal(t, h.get("/limited"), 429, "rate_limited")
	expectConsumerRefusal(t, "keyed without a key", h.get("/keyed"), 401, "unauthenticated", "missing_credentials")
	if resp, body := sendRaw(t, addr, "GET", "/keyed", "X-Api-Key", goodKey); resp.StatusCode != 200 || body != "secret" {
		t.Errorf("keyed with a key: %d %q", resp.StatusCode, body)
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("the upstream got %d requests; redirects and fixed answers are levee's", n)
	}
	if v := h.metric(`levee_requests_total{code="301",route="moved",upstream=""}`); v != 3 {
		t.Errorf("levee_requests_total of route moved, 301: %v, want 3", v)
	}
}

// corsUpstreamYAML is the CORS test's gateway: an upstream route with
// credentials, a public "*" route, a limited route, a keyed route and a
// data route over SQLite.
func corsConfig(up, dbPath, stateDir string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
upstreams:
  web: {endpoints: [{address: %s}]}
data_sources:
  sales: {driver: sqlite, path: %s, max_conns: 2}
routes:
  - name: api
    match: {path_prefix: /api, methods: [GET, POST]}
    upstream: web
    cors:
      allow_origins: ["https://app.example.com", "https://*.example.org"]
      allow_methods: [GET, POST]
      allow_headers: [Content-Type, X-Token]
      expose_headers: [X-Up]
      max_age: 2m
      allow_credentials: true
  - {name: public, match: {path_prefix: /public}, upstream: web, cors: {allow_origins: ["*"]}}
  - name: limited
    match: {path_prefix: /limited}
    upstream: web
    anonymous_limits: {rate: 0.01, burst: 1}
    cors: {allow_origins: ["https://app.example.com"]}
  - {name: keyed, match: {path_prefix: /keyed}, upstream: web, auth: api_key, cors: {allow_origins: ["https://app.example.com"]}}
  - name: customers
    match: {path_prefix: /v1/customers}
    cors: {allow_origins: ["https://app.example.com"], allow_methods: [GET]}
    data:
      source: sales
      table: customers
      columns: [id, name, region, created_at]
      filters: {region: [eq]}
      order: [id]
  - {name: nocors, match: {path_prefix: /nocors}, upstream: web}
apps:
  - {id: good, api_key_sha256: [%s], grants: [keyed]}
`, dataQuote(stateDir), up, dataQuote(dbPath), keyHash(goodKey))
}

// corsHeaders are the answer fields the CORS test compares.
var corsHeaders = []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Allow-Methods",
	"Access-Control-Allow-Headers", "Access-Control-Max-Age", "Access-Control-Expose-Headers", "Vary"}

// TestCORS (issue 25 item 7): preflights from allowed and disallowed
// origins, with and without credentials, on an upstream route and a data
// route, answered by levee and never reaching the upstream; actual
// requests with the CORS headers on the upstream's answer (its own
// replaced), on a data route's, and on levee's refusals (429, 401); the
// per-address preflight cap.
func TestCORS(t *testing.T) {
	up := newHeaderUpstream(t)
	dbPath, _ := sqliteOrders(t)
	h := start(t, corsConfig(hostPort(up.srv), dbPath, t.TempDir()))
	addr := strings.TrimPrefix(h.base, "http://")
	const pfVary = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
	allowed := map[string]string{
		"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Allow-Credentials": "true",
		"Access-Control-Allow-Methods": "GET, POST", "Access-Control-Allow-Headers": "Content-Type, X-Token",
		"Access-Control-Max-Age": "120", "Vary": pfVary,
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(out, kv[i])
			} else {
				out[kv[i]] = kv[i+1]
			}
		}
		return out
	}
	refusedPF := map[string]string{"Vary": pfVary}
	for _, c := range []struct {
		name, target string
		hdr          []string
		want         map[string]string
	}{
		{"allowed", "/api/items", []string{"Origin", "https://app.example.com", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type, x-token"}, allowed},
		{"subdomain wildcard", "/api/items", []string{"Origin", "https://a.b.example.org", "Access-Control-Request-Method", "GET"},
			with(allowed, "Access-Control-Allow-Origin", "https://a.b.example.org")},
		{"safelisted header", "/api/items", []string{"Origin", "https://app.example.com", "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "accept-language"}, allowed},
		{"disallowed origin", "/api/items", []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "GET"}, refusedPF},
		{"wildcard's apex", "/api/items", []string{"Origin", "https://example.org", "Access-Control-Request-Method", "GET"}, refusedPF},
		{"other scheme", "/api/items", []string{"Origin", "http://app.example.com", "Access-Control-Request-Method", "GET"}, refusedPF},
		{"other port", "/api/items", []string{"Origin", "https://app.example.com:8443", "Access-Control-Request-Method", "GET"}, refusedPF},
		{"disallowed header", "/api/items", []string{"Origin", "https://app.example.com", "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "x-secret"}, refusedPF},
		{"star without credentials", "/public/x", []string{"Origin", "https://anyone.example", "Access-Control-Request-Method", "POST"},
			map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, HEAD, POST", "Access-Control-Max-Age": "600", "Vary": pfVary}},
		{"data route", "/v1/customers", []string{"Origin", "https://app.example.com", "Access-Control-Request-Method", "GET"},
			map[string]string{"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Allow-Methods": "GET", "Access-Control-Max-Age": "600", "Vary": pfVary}},
		{"data route, disallowed origin", "/v1/customers", []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "GET"}, refusedPF},
		{"keyed route, no credentials needed", "/keyed/x", []string{"Origin", "https://app.example.com", "Access-Control-Request-Method", "GET"},
			map[string]string{"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Allow-Methods": "GET, HEAD, POST", "Access-Control-Max-Age": "600", "Vary": pfVary}},
	} {
		resp, body := sendRaw(t, addr, "OPTIONS", c.target, c.hdr...)
		if resp.StatusCode != http.StatusNoContent || body != "" {
			t.Errorf("preflight %s: %d %q, want 204 and no body", c.name, resp.StatusCode, body)
		}
		for _, k := range corsHeaders {
			if got := strings.Join(resp.Header.Values(k), ", "); got != c.want[k] {
				t.Errorf("preflight %s: %s = %q, want %q", c.name, k, got, c.want[k])
			}
		}
	}
	if n := up.hits.Load(); n != 0 {
		t.Fatalf("preflights reached the upstream %d times", n)
	}
	for series, want := range map[string]float64{
		`levee_cors_preflights_total{result="allowed",route="api"}`:       3,
		`levee_cors_preflights_total{result="refused",route="api"}`:       5,
		`levee_cors_preflights_total{result="allowed",route="customers"}`: 1,
		`levee_cors_preflights_total{result="refused",route="customers"}`: 1,
		`levee_cors_preflights_total{result="refused",route="limited"}`:   0,
	} {
		if v := h.metric(series); v != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
	// A route without cors takes OPTIONS as any request: forwarded.
	if resp, _ := sendRaw(t, addr, "OPTIONS", "/nocors", "Origin", "https://app.example.com", "Access-Control-Request-Method", "GET"); resp.StatusCode != 200 || up.hits.Load() != 1 {
		t.Errorf("OPTIONS on a route without cors: %d, upstream hits %d", resp.StatusCode, up.hits.Load())
	}

	// Actual requests: levee's CORS headers replace the upstream's, and
	// Vary keeps the upstream's Accept-Encoding.
	for _, c := range []struct {
		name, target, origin string
		want                 map[string]string
	}{
		{"allowed", "/api/x", "https://app.example.com", map[string]string{"Access-Control-Allow-Origin": "https://app.example.com",
			"Access-Control-Allow-Credentials": "true", "Access-Control-Expose-Headers": "X-Up", "Vary": "Accept-Encoding, Origin"}},
		{"disallowed", "/api/x", "https://evil.example", map[string]string{"Vary": "Accept-Encoding, Origin"}},
		{"no origin", "/api/x", "", map[string]string{"Vary": "Accept-Encoding, Origin"}},
		{"star", "/public/x", "https://anyone.example", map[string]string{"Access-Control-Allow-Origin": "*", "Vary": "Accept-Encoding, Origin"}},
	} {
		var hdr []string
		if c.origin != "" {
			hdr = []string{"Origin", c.origin}
		}
		resp, _ := sendRaw(t, addr, "GET", c.target, hdr...)
		if resp.StatusCode != 200 {
			t.Errorf("%s: status %d", c.name, resp.StatusCode)
		}
		for _, k := range corsHeaders {
			if got := strings.Join(resp.Header.Values(k), ", "); got != c.want[k] {
				t.Errorf("actual %s: %s = %q, want %q", c.name, k, got, c.want[k])
			}
		}
	}

	// The data route's answer carries them, and a page can read its JSON.
	resp, body := sendRaw(t, addr, "GET", "/v1/customers?region=eq.north", "Origin", "https://app.example.com")
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Origin") || !json.Valid([]byte(body)) || !strings.Contains(body, "Customer 4") {
		t.Errorf("data route: %d %v %q", resp.StatusCode, resp.Header, body)
	}

	// levee's refusals carry them, so the page can read why (429, 401).
	for _, c := range []struct {
		target string
		hdr    []string
		status int
	}{
		{"/limited", nil, 200},
		{"/limited", nil, 429},
		{"/keyed/x", nil, 401},
	} {
		resp, body := sendRaw(t, addr, "GET", c.target, append([]string{"Origin", "https://app.example.com"}, c.hdr...)...)
		if resp.StatusCode != c.status || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
			!slices.Contains(resp.Header.Values("Vary"), "Origin") {
			t.Errorf("%s: %d ACAO %q Vary %q (%s)", c.target, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Values("Vary"), body)
		}
	}

	// Preflights count against no app or route limit: /limited has spent
	// its burst, its preflight is still answered.
	if resp, _ := sendRaw(t, addr, "OPTIONS", "/limited", "Origin", "https://app.example.com", "Access-Control-Request-Method", "GET"); resp.StatusCode != 204 ||
		resp.Header.Get("Access-Control-Allow-Origin") == "" {
		t.Errorf("preflight of a limited route: %d %v", resp.StatusCode, resp.Header)
	}

	// The per-address cap: a flood of preflights is refused 429 once the
	// burst (100) is spent; 300 at once need 4 s at 50/s to stay under.
	refused := 0
	for range 300 {
		resp, _ := sendRaw(t, addr, "OPTIONS", "/public/x", "Origin", "https://a.example", "Access-Control-Request-Method", "GET")
		if resp.StatusCode == 429 {
			refused++
		} else if resp.StatusCode != 204 {
			t.Fatalf("preflight flood: status %d", resp.StatusCode)
		}
	}
	if refused == 0 {
		t.Error("300 preflights from one address, none refused")
	}
	t.Logf("preflight flood: %d of 300 refused 429", refused)
	if v := h.metric(`levee_cors_preflights_total{result="refused",route="public"}`); v != float64(refused) {
		t.Errorf("levee_cors_preflights_total of the flood's refusals = %v, want %d", v, refused)
	}
	if n := up.hits.Load(); n != 1+4+1 {
		t.Errorf("upstream hits %d, want 6 (no preflight among them)", n)
	}
}

// TestStepsReload: a reload applies a changed header value, turns a
// proxied route into a fixed answer and adds cors, on the running levee;
// GET /api/v1/routes shows the new kind.
func TestStepsReload(t *testing.T) {
	up := newHeaderUpstream(t)
	cfg := func(env, second string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  web: {endpoints: [{address: %s}]}
routes:
  - {name: api, match: {path_prefix: /api}, upstream: web, headers: {request: {set: {X-Env: %s}}}}
  - {name: page, match: {path_prefix: /page}, %s}
`, hostPort(up.srv), env, second)
	}
	h := start(t, cfg("one", "upstream: web"))
	addr := strings.TrimPrefix(h.base, "http://")
	sendRaw(t, addr, "GET", "/api")
	if v := up.last(t).Header.Get("X-Env"); v != "one" {
		t.Fatalf("before the reload: X-Env %q", v)
	}
	h.writeConfig(cfg("two", `respond: {status: 503, body: "down for maintenance"}, cors: {allow_origins: ["https://app.example.com"]}`))
	resp, err := h.client.Post(h.admin+"/api/v1/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("reload: %d", resp.StatusCode)
	}
	sendRaw(t, addr, "GET", "/api")
	if v := up.last(t).Header.Get("X-Env"); v != "two" {
		t.Errorf("after the reload: X-Env %q, want two", v)
	}
	hits := up.hits.Load()
	r, body := sendRaw(t, addr, "GET", "/page", "Origin", "https://app.example.com")
	if r.StatusCode != 503 || body != "down for maintenance" || r.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || up.hits.Load() != hits {
		t.Errorf("page after the reload: %d %q ACAO %q, upstream hits %d -> %d", r.StatusCode, body, r.Header.Get("Access-Control-Allow-Origin"), hits, up.hits.Load())
	}
	ar, err := h.client.Get(h.admin + "/api/v1/routes")
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Body.Close()
	var doc struct {
		Routes []struct{ Name, Kind string } `json:"routes"`
	}
	if err := json.NewDecoder(ar.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, rv := range doc.Routes {
		kinds[rv.Name] = rv.Kind
	}
	if kinds["api"] != "upstream" || kinds["page"] != "respond" {
		t.Errorf("GET /api/v1/routes kinds: %v, want api upstream, page respond", kinds)
	}
}
