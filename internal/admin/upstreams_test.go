package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// pagedGateway serves upstreams of generated endpoints, paged as the
// gateway pages them (address order, after exclusive). With block set,
// Endpoints signals entered and waits for release before its first
// endpoint: a test holds heavy-read slots with it.
type pagedGateway struct {
	fakeGateway
	ups   []UpstreamView
	addrs map[string][]string // sorted
	block atomic.Bool
	// entered receives one value per Endpoints call that is waiting;
	// release ends every wait when closed.
	entered chan struct{}
	release chan struct{}
}

func newPagedGateway(sizes map[string]int) *pagedGateway {
	g := &pagedGateway{addrs: map[string][]string{}, entered: make(chan struct{}, 16), release: make(chan struct{})}
	names := make([]string, 0, len(sizes))
	for name := range sizes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var list []string
		for i := range sizes[name] {
			list = append(list, fmt.Sprintf("10.%d.%d.%d:80", i>>16, i>>8&255, i&255))
		}
		sort.Strings(list)
		g.addrs[name] = list
		g.ups = append(g.ups, UpstreamView{Name: name, Balancer: "round_robin"})
	}
	return g
}

func (g *pagedGateway) Upstreams() []UpstreamView { return g.ups }

func (g *pagedGateway) Endpoints(name, after string, limit int, fn func(EndpointView) bool) (EndpointsPage, bool) {
	list, ok := g.addrs[name]
	if !ok {
		return EndpointsPage{}, false
	}
	if g.block.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
	start := sort.SearchStrings(list, after)
	if start < len(list) && list[start] == after {
		start++
	}
	end := min(len(list), start+limit)
	for _, a := range list[start:end] {
		if !fn(EndpointView{Address: a, Weight: 1, EffectiveWeight: 1, State: "healthy"}) {
			break
		}
	}
	return EndpointsPage{Total: len(list), More: end < len(list)}, true
}

func pagedServer(t *testing.T, g Gateway) *httptest.Server {
	t.Helper()
	h, err := NewHandler(Options{Gateway: g, Gatherer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// endpointsDoc is GET /api/v1/upstreams/{name}/endpoints.
type endpointsDoc struct {
	Upstream  string         `json:"upstream"`
	Endpoints []EndpointView `json:"endpoints"`
	Total     int            `json:"total"`
	Next      string         `json:"next"`
}

func getDoc(t *testing.T, srv *httptest.Server, path string, v any) (int, http.Header, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == 200 && v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, b)
		}
	}
	return resp.StatusCode, resp.Header, string(b)
}

// TestEndpointPagesWalk: following next from the first page lists every
// endpoint exactly once, in address order, with the total on each page
// and no next on the last; an after past the end and an after that is no
// endpoint's address start where they sort.
func TestEndpointPagesWalk(t *testing.T) {
	g := newPagedGateway(map[string]int{"big": 2503, "small": 3})
	srv := pagedServer(t, g)
	want := g.addrs["big"]

	var got []string
	path, pages := "/api/v1/upstreams/big/endpoints?limit=1000", 0
	for path != "" {
		var doc endpointsDoc
		if st, _, b := getDoc(t, srv, path, &doc); st != 200 {
			t.Fatalf("GET %s: %d %s", path, st, b)
		}
		if doc.Upstream != "big" || doc.Total != len(want) {
			t.Fatalf("GET %s: upstream %q total %d, want big %d", path, doc.Upstream, doc.Total, len(want))
		}
		for _, e := range doc.Endpoints {
			got = append(got, e.Address)
		}
		pages++
		if pages > 10 {
			t.Fatalf("more than 10 pages of 1000 for %d endpoints; last next %q", len(want), doc.Next)
		}
		if doc.Next != "" && !strings.HasPrefix(doc.Next, "/api/v1/upstreams/big/endpoints?after=") {
			t.Fatalf("next %q", doc.Next)
		}
		path = doc.Next
	}
	if pages != 3 || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("walk: %d pages, %d endpoints (first %v), want 3 pages and the %d endpoints in address order", pages, len(got), got[:min(3, len(got))], len(want))
	}

	for _, c := range []struct {
		after string
		first string // "" for an empty page
		n     int
	}{
		{after: want[len(want)-1], n: 0},             // the last address: nothing after it
		{after: "zzz", n: 0},                         // beyond the end
		{after: "10.0.0.0:80", first: want[1], n: 5}, // an address: the page starts after it
		{after: "10.0.0.0:800", first: want[sort.SearchStrings(want, "10.0.0.0:800")], n: 5}, // no endpoint's address: where it sorts
		{after: "", first: want[0], n: 5},
	} {
		var doc endpointsDoc
		p := "/api/v1/upstreams/big/endpoints?limit=5&after=" + c.after
		if st, _, b := getDoc(t, srv, p, &doc); st != 200 {
			t.Fatalf("GET %s: %d %s", p, st, b)
		}
		if len(doc.Endpoints) != c.n || c.n > 0 && doc.Endpoints[0].Address != c.first || doc.Total != len(want) {
			t.Errorf("after %q: %d endpoints (%v), total %d; want %d from %q", c.after, len(doc.Endpoints), doc.Endpoints, doc.Total, c.n, c.first)
		}
		if (c.n == 0) != (doc.Next == "") {
			t.Errorf("after %q: next %q", c.after, doc.Next)
		}
	}
}

// TestUpstreamListsFirstPage: GET /api/v1/upstreams shows each upstream
// with at most limit endpoints (1000 without ?limit), its total, and
// endpoints_next only when it has more; GET /api/v1/upstreams/{name} the
// same for one, after ?after.
func TestUpstreamListsFirstPage(t *testing.T) {
	g := newPagedGateway(map[string]int{"big": 1500, "small": 3, "empty": 0})
	srv := pagedServer(t, g)
	var doc struct {
		Upstreams []UpstreamView `json:"upstreams"`
	}
	if st, _, b := getDoc(t, srv, "/api/v1/upstreams", &doc); st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	type want struct {
		n, total int
		next     string
	}
	check := func(what string, u UpstreamView, w want) {
		t.Helper()
		if len(u.Endpoints) != w.n || u.EndpointsTotal != w.total || u.EndpointsNext != w.next || u.Balancer != "round_robin" {
			t.Errorf("%s %s: %d endpoints, total %d, next %q, balancer %q; want %d, %d, %q", what, u.Name, len(u.Endpoints), u.EndpointsTotal, u.EndpointsNext, u.Balancer, w.n, w.total, w.next)
		}
	}
	big := g.addrs["big"]
	wants := map[string]want{
		"big":   {DefaultEndpointPage, 1500, "/api/v1/upstreams/big/endpoints?after=" + big[DefaultEndpointPage-1] + "&limit=1000"},
		"small": {3, 3, ""},
		"empty": {0, 0, ""},
	}
	if len(doc.Upstreams) != 3 {
		t.Fatalf("%d upstreams, want 3", len(doc.Upstreams))
	}
	for _, u := range doc.Upstreams {
		check("GET /api/v1/upstreams", u, wants[u.Name])
	}
	// endpoints and endpoints_total are always present, empty or not.
	_, _, raw := getDoc(t, srv, "/api/v1/upstreams/empty", nil)
	if !strings.Contains(raw, `"endpoints": []`) || !strings.Contains(raw, `"endpoints_total": 0`) {
		t.Errorf("an upstream without endpoints: %s", raw)
	}
	// Indented as before paging; the link's & as it is.
	small := g.addrs["small"]
	wantRaw := `{
  "name": "small",
  "balancer": "round_robin",
  "panic": false,
  "panic_total": 0,
  "endpoints": [
    {
      "address": "` + small[0] + `",
      "weight": 1,
      "effective_weight": 1,
      "state": "healthy",
      "ejections": 0,
      "inflight": 0,
      "requests": 0,
      "failures": 0
    }
  ],
  "endpoints_total": 3,
  "endpoints_next": "/api/v1/upstreams/small/endpoints?after=` + small[0] + `&limit=1"
}
`
	if _, _, raw := getDoc(t, srv, "/api/v1/upstreams/small?limit=1", nil); raw != wantRaw {
		t.Errorf("GET /api/v1/upstreams/small?limit=1:\n%s\nwant\n%s", raw, wantRaw)
	}

	if st, _, b := getDoc(t, srv, "/api/v1/upstreams?limit=2", &doc); st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	for _, u := range doc.Upstreams {
		if u.Name == "small" {
			check("?limit=2", u, want{2, 3, "/api/v1/upstreams/small/endpoints?after=" + g.addrs["small"][1] + "&limit=2"})
		}
	}
	var one UpstreamView
	if st, _, b := getDoc(t, srv, "/api/v1/upstreams/big?limit=600&after="+big[999], &one); st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	check("GET /api/v1/upstreams/big after the 1000th", one, want{500, 1500, ""})
	if one.Endpoints[0].Address != big[1000] {
		t.Errorf("first endpoint after %s: %s, want %s", big[999], one.Endpoints[0].Address, big[1000])
	}
	if st, _, b := getDoc(t, srv, "/api/v1/upstreams/nope", nil); st != 404 || !strings.Contains(b, "no upstream named nope") {
		t.Errorf("unknown upstream: %d %s", st, b)
	}
	if st, _, b := getDoc(t, srv, "/api/v1/upstreams/nope/endpoints", nil); st != 404 {
		t.Errorf("unknown upstream's endpoints: %d %s", st, b)
	}
}

// TestNoUpstreams: the list without upstreams is as before paging.
func TestNoUpstreams(t *testing.T) {
	srv := pagedServer(t, newPagedGateway(nil))
	if st, _, b := getDoc(t, srv, "/api/v1/upstreams", nil); st != 200 || b != "{\n  \"upstreams\": []\n}\n" {
		t.Errorf("no upstreams: %d %q", st, b)
	}
}

// TestEndpointPageLimits: limit is 1 to MaxEndpointPage; anything else is
// 400 naming the parameter and the value, before anything is read.
func TestEndpointPageLimits(t *testing.T) {
	g := newPagedGateway(map[string]int{"big": MaxEndpointPage + 5})
	srv := pagedServer(t, g)
	var doc endpointsDoc
	if st, _, b := getDoc(t, srv, fmt.Sprintf("/api/v1/upstreams/big/endpoints?limit=%d", MaxEndpointPage), &doc); st != 200 || len(doc.Endpoints) != MaxEndpointPage || doc.Next == "" {
		t.Fatalf("limit=max: %d, %d endpoints, next %q %.200s", st, len(doc.Endpoints), doc.Next, b)
	}
	if st, _, b := getDoc(t, srv, "/api/v1/upstreams/big/endpoints?limit=1", &doc); st != 200 || len(doc.Endpoints) != 1 {
		t.Fatalf("limit=1: %d, %d endpoints %.200s", st, len(doc.Endpoints), b)
	}
	for _, c := range []struct{ query, want string }{
		{"limit=0", `limit: must be a whole number from 1 to 10000, got \"0\"`},
		{"limit=-1", `got \"-1\"`},
		{fmt.Sprintf("limit=%d", MaxEndpointPage+1), `got \"10001\"`},
		{"limit=abc", `got \"abc\"`},
		{"limit=", `got \"\"`},
		{"limit=1.5", `got \"1.5\"`},
		{"limit=1&limit=2", "limit: given 2 times"},
		{"after=" + strings.Repeat("a", maxAfterBytes+1), "after: must be an endpoint address of at most 512 bytes, got 513 bytes"},
	} {
		for _, p := range []string{"/api/v1/upstreams/big/endpoints?", "/api/v1/upstreams/big?", "/api/v1/upstreams?"} {
			if strings.HasPrefix(c.query, "after") && p == "/api/v1/upstreams?" {
				continue
			}
			st, _, b := getDoc(t, srv, p+c.query, nil)
			if st != 400 || !strings.Contains(b, c.want) || !strings.Contains(b, `"reason": "bad_request"`) {
				t.Errorf("GET %s%.40s: %d %s, want 400 with %s", p, c.query, st, b, c.want)
			}
		}
	}
	if st, _, b := getDoc(t, srv, "/api/v1/upstreams?after=x", nil); st != 400 || !strings.Contains(b, "after: pages one upstream's endpoints") {
		t.Errorf("after on the list of upstreams: %d %s", st, b)
	}
}

// TestHeavyReadsBounded: with MaxHeavyReads upstream reads held inside the
// gateway (its iterator blocked), the next heavy read is 503 admin_busy
// with Retry-After at once, on each heavy path, while other paths answer;
// once released, the held reads complete and a new one is served.
func TestHeavyReadsBounded(t *testing.T) {
	g := newPagedGateway(map[string]int{"big": 50})
	g.block.Store(true)
	srv := pagedServer(t, g)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	type answer struct {
		status int
		err    error
		n      int
	}
	answers := make(chan answer, MaxHeavyReads)
	for range MaxHeavyReads {
		go func() {
			resp, err := client.Get(srv.URL + "/api/v1/upstreams/big/endpoints")
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			// Read to the end: the chunked answer's last chunk is written
			// after the handler returned, and so after its slot is free.
			b, err := io.ReadAll(resp.Body)
			var doc endpointsDoc
			if err == nil {
				err = json.Unmarshal(b, &doc)
			}
			answers <- answer{status: resp.StatusCode, err: err, n: len(doc.Endpoints)}
		}()
	}
	for range MaxHeavyReads {
		<-g.entered // a read holds its slot, blocked in the gateway
	}
	for _, p := range []string{"/api/v1/upstreams", "/api/v1/upstreams/big", "/api/v1/upstreams/big/endpoints?limit=1"} {
		st, h, b := getDoc(t, srv, p, nil)
		if st != 503 || h.Get("Retry-After") != "1" || !strings.Contains(b, `"reason": "admin_busy"`) || !strings.Contains(b, `"error": "4 heavy admin reads`) {
			t.Errorf("GET %s with %d heavy reads in progress: %d Retry-After %q %s; want 503 admin_busy, Retry-After 1", p, MaxHeavyReads, st, h.Get("Retry-After"), b)
		}
	}
	if st, _, b := getDoc(t, srv, "/healthz", nil); st != 200 {
		t.Errorf("/healthz while the heavy reads are held: %d %s", st, b)
	}
	close(g.release)
	for range MaxHeavyReads {
		a := <-answers
		if a.err != nil || a.status != 200 || a.n != 50 {
			t.Errorf("a held read: %d, %d endpoints, %v; want 200 with 50", a.status, a.n, a.err)
		}
	}
	g.block.Store(false)
	var doc endpointsDoc
	if st, _, b := getDoc(t, srv, "/api/v1/upstreams/big/endpoints", &doc); st != 200 || len(doc.Endpoints) != 50 {
		t.Errorf("after the held reads: %d %.200s", st, b)
	}
}
