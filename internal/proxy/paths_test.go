package proxy

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/upstream"
	"github.com/levee-gw/levee/internal/urlpath"
	"github.com/prometheus/client_golang/prometheus"
)

// pathsTable routes /users/ (public), /users/admin/ (keyed), /raw/
// (raw_path) and / (catch-all) to one upstream.
func pathsTable(t *testing.T, mode urlpath.EscapedSlashes) *Table {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	up := &Upstream{Name: "u"}
	routes := []*Route{
		{Name: "users", PathPrefix: "/users/", Upstream: up},
		{Name: "admin", PathPrefix: "/users/admin/", Upstream: up, Auth: AuthAPIKey},
		{Name: "raw", PathPrefix: "/raw/", Upstream: up, RawPath: true},
		{Name: "all", PathPrefix: "/", Upstream: up},
	}
	return NewTable(routes, []*Upstream{up}, m).WithEscapedSlashes(mode)
}

// readRequest parses a raw request as the data listener's handoff to
// net/http would.
func readRequest(t *testing.T, raw string) *http.Request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return r
}

func TestRouteRequestNormalises(t *testing.T) {
	cases := []struct {
		mode                urlpath.EscapedSlashes
		target, host        string
		route               string // "" with bad set, or for no route
		bad                 bool
		uri, path, wantHost string // what is forwarded and routed
		opaque              string
	}{
		{mode: urlpath.Reject, target: "/users/42?a=%2e", route: "users", uri: "/users/42?a=%2e", path: "/users/42"},
		{mode: urlpath.Reject, target: "/users/x/../admin/x", route: "admin", uri: "/users/admin/x", path: "/users/admin/x"},
		{mode: urlpath.Reject, target: "/users//admin/x?q", route: "admin", uri: "/users/admin/x?q", path: "/users/admin/x"},
		{mode: urlpath.Reject, target: "/users/caf%c3%a9", route: "users", uri: "/users/caf%C3%A9", path: "/users/café"},
		{mode: urlpath.Reject, target: "/users%2Fadmin/x", bad: true},
		{mode: urlpath.Reject, target: "/users/..;/admin/x", bad: true},
		// ';' parameters that a servlet container drops route elsewhere.
		{mode: urlpath.Reject, target: "/users;x/admin/x", bad: true},
		{mode: urlpath.Reject, target: "/users/a;v=1/b", route: "users", uri: "/users/a;v=1/b", path: "/users/a;v=1/b"},
		// keep: %2F stays, unless decoding it would route elsewhere.
		{mode: urlpath.Keep, target: "/users/a%2fb", route: "users", uri: "/users/a%2Fb", path: "/users/a/b"},
		{mode: urlpath.Keep, target: "/users/x%2F..%2Fadmin/x", bad: true},
		{mode: urlpath.Decode, target: "/users/x%2F..%2Fadmin/x", route: "admin", uri: "/users/admin/x", path: "/users/admin/x"},
		// raw_path: routed on the normal form, forwarded as received;
		// under reject it alone may take an escaped slash.
		{mode: urlpath.Reject, target: "/raw/@scope%2fpkg/./x?v", route: "raw", uri: "/raw/@scope%2fpkg/./x?v", path: "/raw/@scope/pkg/x", opaque: "/raw/@scope%2fpkg/./x"},
		{mode: urlpath.Reject, target: "/raw/a%2F..%2F..%2Fusers/admin/x", bad: true},
		{mode: urlpath.Reject, target: "/raw/../users/admin/x", route: "admin", uri: "/users/admin/x", path: "/users/admin/x"},
		{mode: urlpath.Reject, target: "//raw/a/../b", route: "raw", uri: "/raw/b", path: "/raw/b"},
		// absolute-form: origin form forwarded, authority is the host.
		{mode: urlpath.Reject, target: "http://api.example/users/./admin/x?k=v", host: "other", route: "admin", uri: "/users/admin/x?k=v", path: "/users/admin/x", wantHost: "api.example"},
		{mode: urlpath.Reject, target: "HTTP://api.example", route: "all", uri: "/", path: "/", wantHost: "api.example"},
		{mode: urlpath.Reject, target: "http://api.example?x", route: "all", uri: "/?x", path: "/", wantHost: "api.example"},
		{mode: urlpath.Reject, target: "http://u@api.example/users/", bad: true},
		{mode: urlpath.Reject, target: "ftp://api.example/users/", bad: true},
	}
	for _, c := range cases {
		tab := pathsTable(t, c.mode)
		host := c.host
		if host == "" {
			host = "h.example"
		}
		r := readRequest(t, "GET "+c.target+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		rt, ok, _, bad, _ := tab.routeRequest(r)
		name := ""
		if ok {
			name = rt.Name
		}
		if bad != c.bad || name != c.route {
			t.Errorf("%v %q: route %q, bad %v; want %q, bad %v", c.mode, c.target, name, bad, c.route, c.bad)
			continue
		}
		if bad {
			continue
		}
		if r.RequestURI != c.uri || r.URL.Path != c.path || r.URL.Opaque != c.opaque {
			t.Errorf("%v %q: RequestURI %q, Path %q, Opaque %q; want %q, %q, %q", c.mode, c.target, r.RequestURI, r.URL.Path, r.URL.Opaque, c.uri, c.path, c.opaque)
		}
		if want := c.wantHost; want != "" && r.Host != want {
			t.Errorf("%q: Host %q, want %q", c.target, r.Host, want)
		}
		// The net/http transport sends what the fast path sends.
		if out := upstream.OutboundRequest(r.Context(), r, upstream.Outbound{Addr: "10.0.0.1:80", RequestID: "id"}); out.URL.RequestURI() != c.uri {
			t.Errorf("%q: net/http path would send %q, fast path %q", c.target, out.URL.RequestURI(), c.uri)
		}
	}
}

// TestRouteRequestNormalPathDoesNotAllocate: a path already in normal form
// costs the request path no allocation.
func TestRouteRequestNormalPathDoesNotAllocate(t *testing.T) {
	tab := pathsTable(t, urlpath.Reject)
	r := readRequest(t, "GET /users/42/profile?x=1 HTTP/1.1\r\nHost: h\r\n\r\n")
	n := testing.AllocsPerRun(100, func() {
		if rt, ok, _, bad, _ := tab.routeRequest(r); !ok || bad || rt.Name != "users" {
			t.Fatal("not routed")
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per request, want 0", n)
	}
}
