package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/statedb"
	"github.com/prometheus/client_golang/prometheus"
)

// countingGateway is fakeGateway counting reloads, pushes and confirms,
// so that a test can see that a refused request changed nothing.
type countingGateway struct {
	fakeGateway
	acts *atomic.Int64
}

func (g countingGateway) Reload() error { g.acts.Add(1); return nil }
func (g countingGateway) PushEndpoints(context.Context, string, []byte) (PushResult, error) {
	g.acts.Add(1)
	return PushResult{}, nil
}
func (g countingGateway) ConfirmUpstream(context.Context, string) (ConfirmResult, error) {
	g.acts.Add(1)
	return ConfirmResult{}, nil
}

// browserServer starts the admin handler on a real loopback listener with
// a write token (when token is not "") and admin.hosts admin.internal.
func browserServer(t *testing.T, token string, openReads bool) (srv *httptest.Server, store *apps.Store, acts *atomic.Int64) {
	t.Helper()
	store, err := apps.Open(context.Background(), apps.Options{Config: statedb.Config{Path: filepath.Join(t.TempDir(), "apps.db")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	acts = new(atomic.Int64)
	o := Options{Gateway: countingGateway{acts: acts}, Gatherer: prometheus.NewRegistry(), Apps: store,
		Hosts: func() []string { return []string{"admin.internal"} }, OpenReads: func() bool { return openReads }}
	if token != "" {
		toks := []Token{NewToken(token, ScopeWrite)}
		o.Tokens = func() []Token { return toks }
	}
	h, err := NewHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, store, acts
}

// rawExchange writes req (CRLF line ends, as written) on a fresh
// connection to addr and returns the status and the reason of the JSON
// body ("" when none).
func rawExchange(t *testing.T, addr, req string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", req, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var doc struct {
		Reason string `json:"reason"`
		Error  string `json:"error"`
	}
	_ = json.Unmarshal(raw, &doc)
	if (resp.StatusCode == 403 || resp.StatusCode == 415 || resp.StatusCode == 421) && (doc.Reason == "" || doc.Error == "") {
		t.Errorf("%d without a JSON {error, reason}: %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, doc.Reason
}

// head builds a raw HTTP/1.1 request: method, path, Host and extra
// header lines, then body (with its Content-Length unless a header line
// sets Transfer-Encoding).
func head(method, path, host string, body string, lines ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, path)
	if host != "-" {
		fmt.Fprintf(&b, "Host: %s\r\n", host)
	}
	chunked := false
	for _, l := range lines {
		b.WriteString(l + "\r\n")
		chunked = chunked || strings.HasPrefix(l, "Transfer-Encoding:")
	}
	if !chunked && body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("Connection: close\r\n\r\n" + body)
	return b.String()
}

// TestBrowserRefusalsRawSocket: every refusal of browser.go as raw bytes
// on a real socket, each with its status and reason, and what still
// works: the Host of a DNS-rebinding page (421, probes exempt), an Origin
// or Sec-Fetch-Site of another origin (403), a write that is not JSON
// (415: text/plain, a form, multipart, a body without Content-Type,
// chunked); then that none of the refused writes changed anything.
func TestBrowserRefusalsRawSocket(t *testing.T) {
	srv, store, acts := browserServer(t, "", false)
	addr := srv.Listener.Addr().String()
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	other := "http://127.0.0.1:1"
	app := `{"id":"evil"}`
	for _, c := range []struct {
		name   string
		req    string
		status int
		reason string
	}{
		// Host (DNS rebinding).
		{"rebound Host", head("GET", "/api/v1/config", "evil.example:"+port, ""), 421, "host_not_allowed"},
		{"rebound Host, no port", head("GET", "/metrics", "evil.example", ""), 421, "host_not_allowed"},
		{"rebound Host on pprof", head("GET", "/debug/pprof/cmdline", "evil.example:"+port, ""), 421, "host_not_allowed"},
		{"rebound Host on the UI", head("GET", "/ui/", "evil.example:"+port, ""), 421, "host_not_allowed"},
		{"rebound Host write", head("POST", "/api/v1/reload", "evil.example:"+port, ""), 421, "host_not_allowed"},
		{"localhost subdomain", head("GET", "/metrics", "localhost.evil.example:"+port, ""), 421, "host_not_allowed"},
		{"IP with trailing dot is a name", head("GET", "/metrics", "127.0.0.1.:"+port, ""), 421, "host_not_allowed"},
		{"probe with any Host", head("GET", "/healthz", "evil.example:"+port, ""), 200, ""},
		{"readiness with any Host", head("GET", "/readyz", "levee-admin.svc:"+port, ""), 200, ""},
		{"IPv4 Host", head("GET", "/api/v1/upstreams", "127.0.0.1:"+port, ""), 200, ""},
		{"IPv6 Host", head("GET", "/api/v1/upstreams", "[::1]:"+port, ""), 200, ""},
		{"pod IP Host", head("GET", "/metrics", "10.1.2.3:9901", ""), 200, ""},
		{"localhost any port", head("GET", "/api/v1/upstreams", "LocalHost:1234", ""), 200, ""},
		{"listed name", head("GET", "/api/v1/upstreams", "admin.internal:"+port, ""), 200, ""},
		{"listed name, other case, trailing dot", head("GET", "/api/v1/upstreams", "Admin.Internal.", ""), 200, ""},
		{"HTTP/1.0 without Host", "GET /api/v1/upstreams HTTP/1.0\r\n\r\n", 200, ""},
		{"HTTP/1.1 without Host", head("GET", "/api/v1/upstreams", "-", ""), 400, ""},

		// Origin and Sec-Fetch-Site.
		{"cross-origin form post", head("POST", "/api/v1/apps", "127.0.0.1:"+port, "id=evil", "Origin: "+other, "Content-Type: application/x-www-form-urlencoded"), 403, "cross_origin"},
		{"cross-origin JSON", head("POST", "/api/v1/apps", "127.0.0.1:"+port, app, "Origin: "+other, "Content-Type: application/json"), 403, "cross_origin"},
		{"Origin localhost vs Host 127.0.0.1", head("POST", "/api/v1/reload", "127.0.0.1:"+port, "", "Origin: http://localhost:"+port), 403, "cross_origin"},
		{"Origin https vs http listener", head("POST", "/api/v1/reload", "127.0.0.1:"+port, "", "Origin: https://127.0.0.1:"+port), 403, "cross_origin"},
		{"Origin null", head("POST", "/api/v1/reload", "127.0.0.1:"+port, "", "Origin: null"), 403, "cross_origin"},
		{"Origin twice", head("POST", "/api/v1/reload", "127.0.0.1:"+port, "", "Origin: http://127.0.0.1:"+port, "Origin: "+other), 403, "cross_origin"},
		{"Origin on a probe", head("GET", "/readyz", "127.0.0.1:"+port, "", "Origin: "+other), 403, "cross_origin"},
		{"Sec-Fetch-Site cross-site read", head("GET", "/api/v1/config", "127.0.0.1:"+port, "", "Sec-Fetch-Site: cross-site"), 403, "cross_origin"},
		{"Sec-Fetch-Site same-site", head("GET", "/metrics", "127.0.0.1:"+port, "", "Sec-Fetch-Site: same-site"), 403, "cross_origin"},
		{"Sec-Fetch-Site unknown", head("GET", "/metrics", "127.0.0.1:"+port, "", "Sec-Fetch-Site: sideways"), 403, "cross_origin"},
		{"no-cors fetch (no Origin on GET)", head("GET", "/debug/pprof/cmdline", "127.0.0.1:"+port, "", "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: no-cors"), 403, "cross_origin"},
		{"cross-site navigation to the API", head("GET", "/api/v1/config", "127.0.0.1:"+port, "", "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate", "Sec-Fetch-Dest: document"), 403, "cross_origin"},
		{"cross-site navigation to the UI", head("GET", "/ui/", "127.0.0.1:"+port, "", "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate", "Sec-Fetch-Dest: document"), 200, ""},
		{"same-origin fetch", head("GET", "/api/v1/upstreams", "127.0.0.1:"+port, "", "Sec-Fetch-Site: same-origin"), 200, ""},
		{"typed URL", head("GET", "/metrics", "127.0.0.1:"+port, "", "Sec-Fetch-Site: none"), 200, ""},
		{"own Origin, default port form", head("POST", "/api/v1/reload", "127.0.0.1:80", "", "Origin: http://127.0.0.1"), 200, ""},
		{"own Origin", head("POST", "/api/v1/reload", "localhost:"+port, "", "Origin: http://LOCALHOST:"+port, "Sec-Fetch-Site: same-origin"), 200, ""},

		// Content-Type of writes.
		{"text/plain", head("POST", "/api/v1/apps", "127.0.0.1:"+port, app, "Content-Type: text/plain"), 415, "unsupported_media_type"},
		{"text/plain on reload", head("POST", "/api/v1/reload", "127.0.0.1:"+port, "x", "Content-Type: text/plain;charset=UTF-8"), 415, "unsupported_media_type"},
		{"form", head("POST", "/api/v1/apps", "127.0.0.1:"+port, "id=evil", "Content-Type: application/x-www-form-urlencoded"), 415, "unsupported_media_type"},
		{"empty form", head("POST", "/api/v1/reload", "127.0.0.1:"+port, "", "Content-Type: application/x-www-form-urlencoded", "Content-Length: 0"), 415, "unsupported_media_type"},
		{"multipart", head("POST", "/api/v1/apps", "127.0.0.1:"+port, "--b\r\nContent-Disposition: form-data; name=\"id\"\r\n\r\nevil\r\n--b--\r\n", "Content-Type: multipart/form-data; boundary=b"), 415, "unsupported_media_type"},
		{"JSON-looking type", head("POST", "/api/v1/apps", "127.0.0.1:"+port, app, "Content-Type: application/json-patch+json"), 415, "unsupported_media_type"},
		{"Content-Type twice", head("POST", "/api/v1/apps", "127.0.0.1:"+port, app, "Content-Type: application/json", "Content-Type: text/plain"), 415, "unsupported_media_type"},
		{"body without Content-Type", head("POST", "/api/v1/apps", "127.0.0.1:"+port, app), 415, "unsupported_media_type"},
		{"chunked body without Content-Type", head("POST", "/api/v1/reload", "127.0.0.1:"+port, "0\r\n\r\n", "Transfer-Encoding: chunked"), 415, "unsupported_media_type"},
		{"PUT text/plain", head("PUT", "/api/v1/upstreams/x/endpoints", "127.0.0.1:"+port, "[]", "Content-Type: text/plain"), 415, "unsupported_media_type"},
		{"PATCH text/plain", head("PATCH", "/api/v1/apps/evil", "127.0.0.1:"+port, `{"status":"suspended"}`, "Content-Type: text/plain"), 415, "unsupported_media_type"},
		{"DELETE with a form body", head("DELETE", "/api/v1/apps/evil", "127.0.0.1:"+port, "x=1", "Content-Type: application/x-www-form-urlencoded"), 415, "unsupported_media_type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, reason := rawExchange(t, addr, c.req)
			if status != c.status || reason != c.reason {
				t.Errorf("%d %q, want %d %q\n%s", status, reason, c.status, c.reason, c.req)
			}
		})
	}
	// The guard let exactly the two same-origin reloads through; no app
	// was created, patched or deleted.
	if n := acts.Load(); n != 2 {
		t.Errorf("reloads, pushes and confirms that reached the gateway: %d, want 2 (the same-origin reloads)", n)
	}
	if page, err := store.List(context.Background(), "", 10); err != nil || len(page.Apps) != 0 {
		t.Errorf("apps after the refused writes: %+v %v, want none", page.Apps, err)
	}

	// What still works: JSON with parameters, a write without a body.
	for _, c := range []struct {
		req    string
		status int
	}{
		{head("POST", "/api/v1/apps", "127.0.0.1:"+port, app, "Content-Type: Application/JSON; charset=utf-8"), 201},
		{head("PATCH", "/api/v1/apps/evil", "localhost:"+port, `{"status":"suspended"}`, "Content-Type: application/json", "Origin: http://localhost:"+port), 200},
		{head("POST", "/api/v1/apps/evil/keys", "127.0.0.1:"+port, ""), 201},
		{head("POST", "/api/v1/upstreams/x/confirm", "127.0.0.1:"+port, "", "Content-Length: 0"), 200},
		{head("POST", "/api/v1/upstreams/x/confirm", "127.0.0.1:"+port, "", "Content-Type: "), 200}, // Go's http.Post(url, "", nil)
		{head("DELETE", "/api/v1/apps/evil", "admin.internal:"+port, ""), 204},
	} {
		if status, reason := rawExchange(t, addr, c.req); status != c.status {
			t.Errorf("%d %s, want %d\n%s", status, reason, c.status, c.req)
		}
	}
}

// TestBrowserChecksBeforeToken: the order is Host, Origin and
// Sec-Fetch-Site, the token, then Content-Type: a cross-origin request
// without a token is 403 cross_origin (not 401), a text/plain write
// without a token is 401, with the token 415. With OpenReads (the
// generated token's mode), a GET needs no token and a write does.
func TestBrowserChecksBeforeToken(t *testing.T) {
	const tok = "write-token-0123456789"
	srv, _, acts := browserServer(t, tok, true)
	addr := srv.Listener.Addr().String()
	host := "127.0.0.1:" + addr[strings.LastIndexByte(addr, ':')+1:]
	bearer := "Authorization: Bearer " + tok
	for _, c := range []struct {
		name   string
		req    string
		status int
		reason string
	}{
		{"rebound Host, no token", head("POST", "/api/v1/reload", "evil.example", ""), 421, "host_not_allowed"},
		{"cross-origin, no token", head("POST", "/api/v1/reload", host, "", "Origin: http://evil.example"), 403, "cross_origin"},
		{"cross-origin with the token", head("POST", "/api/v1/reload", host, "", "Origin: http://evil.example", bearer), 403, "cross_origin"},
		{"text/plain, no token", head("POST", "/api/v1/reload", host, "x", "Content-Type: text/plain"), 401, "unauthorized"},
		{"text/plain with the token", head("POST", "/api/v1/reload", host, "x", "Content-Type: text/plain", bearer), 415, "unsupported_media_type"},
		{"write without a token", head("POST", "/api/v1/reload", host, ""), 401, "unauthorized"},
		{"write with a wrong token", head("POST", "/api/v1/reload", host, "", "Authorization: Bearer nope-nope-nope-nope"), 401, "unauthorized"},
		{"read without a token (open reads)", head("GET", "/api/v1/apps", host, ""), 200, ""},
		{"metrics without a token", head("GET", "/metrics", host, ""), 200, ""},
		{"write with the token", head("POST", "/api/v1/reload", host, "", bearer), 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if status, reason := rawExchange(t, addr, c.req); status != c.status || reason != c.reason {
				t.Errorf("%d %q, want %d %q", status, reason, c.status, c.reason)
			}
		})
	}
	if n := acts.Load(); n != 1 {
		t.Errorf("reloads: %d, want 1", n)
	}
}

// FuzzBrowserHeaders: the Host and Origin readers never panic, a Host
// they can read is its own origin (so no listener refuses its own page),
// and an Origin with a path, user info or another scheme is never the
// listener's.
func FuzzBrowserHeaders(f *testing.F) {
	for _, s := range []string{"127.0.0.1:9901", "[::1]:80", "localhost", "LOCALHOST.:1", "evil.example:9901", "[::1", "::1", "a:b:c", "", "admin.internal"} {
		f.Add(s, "http://"+s)
	}
	hosts := func() []string { return []string{"admin.internal"} }
	f.Fuzz(func(t *testing.T, host, origin string) {
		allowed := hostAllowed(host, hosts)
		r := &http.Request{Host: host, Method: http.MethodGet}
		_ = sameOrigin(origin, r)
		if host != "" && hostOnly(host) != "" && !strings.ContainsAny(host, "/?#@ ") && !sameOrigin("http://"+host, r) {
			t.Fatalf("Host %q is not its own origin", host)
		}
		for _, bad := range []string{"https://" + host, "http://" + host + "/", "http://x@" + host, "null"} {
			if sameOrigin(bad, r) {
				t.Fatalf("Origin %q counted as the listener's (Host %q)", bad, host)
			}
		}
		if allowed && host != "" {
			if name := strings.TrimSuffix(strings.ToLower(hostOnly(host)), "."); name != "localhost" && name != "admin.internal" {
				if _, err := netip.ParseAddr(hostOnly(host)); err != nil {
					t.Fatalf("Host %q allowed: not an IP, localhost or a listed name", host)
				}
			}
		}
	})
}
