package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestRedirectLocation: the Location of each kind of target, and request
// bytes that try to split the header or point it at another site.
func TestRedirectLocation(t *testing.T) {
	for _, c := range []struct {
		to                string
		https, stripQuery bool
		path, query, host string
		want              string
	}{
		{"/new${path}", false, false, "/a/b", "x=1", "h.example", "/new/a/b?x=1"},
		{"/t", false, true, "/a", "x=1", "h.example", "/t"},
		{"/t?k=v", false, false, "/a", "x=1", "h.example", "/t?k=v"},
		{"", true, false, "/a", "x=1", "h.example:8080", "https://h.example/a?x=1"},
		{"", true, false, "/a", "", "[::1]:8080", "https://[::1]/a"},
		{"", true, false, "//evil.example/x", "", "h.example", "https://h.example/evil.example/x"},
		{"", true, false, "/\\evil.example", "", "h.example", "https://h.example/%5Cevil.example"}, // escaped: no slash to a browser
		{"/x${path}", true, false, "/a", "", "h.example", "https://h.example/x/a"},
		{"https://n.example${path}", false, false, "/a b", "q", "h.example", "https://n.example/a%20b?q"},
		{"/from/${host}${path}", false, false, "/p", "", "h.example", "/from/h.example/p"},
		{"/t", false, false, "/a", "x=\r\nSet-Cookie:1", "h.example", "/t?x=%0D%0ASet-Cookie:1"},
	} {
		rd, err := NewRedirect(301, c.to, c.https, c.stripQuery)
		if err != nil {
			t.Fatalf("%q: %v", c.to, err)
		}
		r := &http.Request{URL: &url.URL{Path: c.path, RawQuery: c.query}, Host: c.host}
		if got := rd.location(r); got != c.want {
			t.Errorf("to %q https %v, request %q?%q host %q: Location %q, want %q", c.to, c.https, c.path, c.query, c.host, got, c.want)
		}
	}
	for _, bad := range []struct {
		status int
		to     string
	}{{300, "/x"}, {301, ""}, {301, "/x${nope}"}, {301, "/x${path"}} {
		if _, err := NewRedirect(bad.status, bad.to, false, false); err == nil {
			t.Errorf("NewRedirect(%d, %q) accepted", bad.status, bad.to)
		}
	}
}

// FuzzRedirectLocation: whatever the request's path, query and host, a
// Location holds only visible ASCII (nothing can end or split the
// header), a path target never becomes protocol-relative, and an
// absolute target keeps its host.
func FuzzRedirectLocation(f *testing.F) {
	f.Add("/a", "x=1", "h.example", uint8(0))
	f.Add("//evil", "", "h", uint8(1))
	f.Add("/\\\\evil", "\r\n", "h:1", uint8(2))
	targets := []string{"/new${path}", "", "https://n.example${path}", "/t/${host}"}
	f.Fuzz(func(t *testing.T, path, query, host string, which uint8) {
		to := targets[int(which)%len(targets)]
		rd, err := NewRedirect(302, to, to == "" || which&4 != 0 && !strings.HasPrefix(to, "http"), which&8 != 0)
		if err != nil {
			t.Fatal(err)
		}
		r := &http.Request{URL: &url.URL{Path: path, RawQuery: query}, Host: host}
		loc := rd.location(r)
		for i := 0; i < len(loc); i++ {
			if loc[i] <= ' ' || loc[i] >= 0x7f {
				t.Fatalf("Location %q has byte %#x", loc, loc[i])
			}
		}
		if strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") {
			t.Fatalf("Location %q is protocol-relative", loc)
		}
		if strings.HasPrefix(to, "https://n.example") && !strings.HasPrefix(loc, "https://n.example/") {
			t.Fatalf("Location %q left the configured host", loc)
		}
	})
}

func testCORS(t testing.TB, origins ...string) *CORS {
	c, err := NewCORS(CORSOptions{AllowOrigins: origins, AllowMethods: []string{"GET", "POST"},
		AllowHeaders: []string{"Content-Type", "X-Token"}, MaxAge: time.Minute, AllowCredentials: origins[0] != "*"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCORSOrigins: exact origins, subdomain wildcards and what they do
// not match.
func TestCORSOrigins(t *testing.T) {
	c := testCORS(t, "https://app.example.com", "https://*.example.org", "http://*.example.net:8080")
	for origin, want := range map[string]bool{
		"https://app.example.com":      true,
		"https://APP.example.com":      true,
		"https://app.example.com:443":  false, // browsers never send the default port
		"http://app.example.com":       false,
		"https://app.example.com.evil": false,
		"https://a.example.org":        true,
		"https://a.b.example.org":      true,
		"https://example.org":          false,
		"https://evilexample.org":      false,
		"https://a.example.org:8443":   false,
		"http://a.example.net:8080":    true,
		"http://a.example.net":         false,
		"https://a_b.example.org":      false,
		"null":                         false,
		"":                             false,
	} {
		if got := c.allows(origin); got != want {
			t.Errorf("allows(%q) = %v, want %v", origin, got, want)
		}
	}
	if _, err := NewCORS(CORSOptions{AllowOrigins: []string{"*"}, AllowCredentials: true}); err == nil {
		t.Error("* with credentials accepted")
	}
}

// FuzzCORSPreflight: any Origin and requested method and headers either
// get no Access-Control-Allow-Origin or get exactly the origin sent, which
// the policy allows; no value written holds a control byte.
func FuzzCORSPreflight(f *testing.F) {
	f.Add("https://app.example.com", "GET", "content-type")
	f.Add("https://a.example.org", "POST", "x-token, accept")
	f.Add("https://a.example.org\r\n", "GET", "x-secret")
	c := testCORS(f, "https://app.example.com", "https://*.example.org")
	f.Fuzz(func(t *testing.T, origin, method, headers string) {
		r := &http.Request{Header: http.Header{"Origin": {origin}, "Access-Control-Request-Method": {method},
			"Access-Control-Request-Headers": {headers}}}
		h := http.Header{}
		ok := c.preflight(h, r)
		got := h.Get("Access-Control-Allow-Origin")
		if ok != (got != "") || (ok && (got != origin || !c.allows(origin))) {
			t.Fatalf("origin %q: allowed %v, Access-Control-Allow-Origin %q", origin, ok, got)
		}
		if ok && strings.ContainsAny(origin, "\r\n\x00") {
			t.Fatalf("origin %q with a control byte allowed", origin)
		}
		a := http.Header{}
		c.answer(a, r)
		if v := a.Get("Access-Control-Allow-Origin"); v != "" && v != origin {
			t.Fatalf("answer to origin %q: %q", origin, v)
		}
	})
}

// TestHeaderOps: remove, set (fixed and expanded) and add, and a value
// cleaned of the control bytes a variable brought.
func TestHeaderOps(t *testing.T) {
	set1, _ := NewHeaderOp("X-Env", "prod")
	set2, _ := NewHeaderOp("X-Who", "${client_ip}/${route}/${host}")
	add, _ := NewHeaderOp("X-Tag", "levee")
	o := &HeaderOps{Remove: []string{"X-Debug"}, Set: []HeaderOp{set1, set2}, Add: []HeaderOp{add}}
	r := &http.Request{RemoteAddr: "[::ffff:10.0.0.1]:5555", Host: "h.example\x01\r\n", Header: http.Header{
		"X-Env": {"dev"}, "X-Debug": {"1"}, "X-Tag": {"c"}}}
	x := &exchange{route: &Route{Name: "api"}, reqID: "id1"}
	o.apply(r.Header, r, x)
	want := http.Header{"X-Env": {"prod"}, "X-Who": {"10.0.0.1/api/h.example"}, "X-Tag": {"c", "levee"}}
	if len(r.Header) != len(want) {
		t.Fatalf("header %v, want %v", r.Header, want)
	}
	for k, v := range want {
		if strings.Join(r.Header[k], "|") != strings.Join(v, "|") {
			t.Errorf("%s = %q, want %q", k, r.Header[k], v)
		}
	}
	if _, err := NewHeaderOp("X", "${nope}"); err == nil {
		t.Error("unknown variable accepted")
	}
}

// TestTLSClientSubjectVariable: ${tls_client_subject} is the client
// certificate's subject, "" without TLS or without a certificate.
func TestTLSClientSubjectVariable(t *testing.T) {
	op, err := NewHeaderOp("X-Client-Cert", "subject=${tls_client_subject}")
	if err != nil {
		t.Fatal(err)
	}
	o := &HeaderOps{Set: []HeaderOp{op}}
	x := &exchange{route: &Route{Name: "api"}}
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "client-1", Organization: []string{"Acme"}}}
	for _, c := range []struct {
		state *tls.ConnectionState
		want  string
	}{
		{nil, "subject="},
		{&tls.ConnectionState{}, "subject="},
		{&tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}, "subject=CN=client-1,O=Acme"},
	} {
		r := &http.Request{Header: http.Header{}, TLS: c.state}
		o.apply(r.Header, r, x)
		if got := r.Header.Get("X-Client-Cert"); got != c.want {
			t.Errorf("TLS %v: %q, want %q", c.state != nil, got, c.want)
		}
	}
}
