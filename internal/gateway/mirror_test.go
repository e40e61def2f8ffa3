package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/admin"
)

// seen is one request as a shadow upstream received it.
type seen struct {
	method, target, host, body string
	header                     http.Header
}

// shadowServer is a real upstream on loopback that records every request
// it receives (bounded: the channel holds 1024) and answers 200 with a
// body of its own.
func shadowServer(t *testing.T) (*httptest.Server, chan seen) {
	t.Helper()
	got := make(chan seen, 1024)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case got <- seen{r.Method, r.RequestURI, r.Host, string(b), r.Header.Clone()}:
		default:
		}
		io.WriteString(w, strings.Repeat("shadow answer ", 100))
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// mirrorConfig is a levee with upstreams primary and shadow and the given
// routes (YAML list items).
func mirrorConfig(primary, shadow, routes string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  primary: {endpoints: [{address: %s}]}
  shadow: {endpoints: [{address: %s}]}
routes:
%s`, primary, shadow, routes)
}

// send sends method path with body (nil: none) and returns status and body.
func (h *harness) send(method, path string, body io.Reader, hdr ...string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.base+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMirrorCopiesRequests: with percent 100, the shadow receives a copy
// of each request (method, target, headers, body), marked Levee-Mirror: 1,
// with the shadow's address as Host and the primary's request id, while
// the client gets the primary's answer unchanged. GET /api/v1/routes shows
// the mirror.
func TestMirrorCopiesRequests(t *testing.T) {
	primary, hits := backend(t, "primary")
	shadow, got := shadowServer(t)
	h := start(t, mirrorConfig(hostPort(primary), hostPort(shadow), `
  - name: api
    match: {path_prefix: /api}
    upstream: primary
    mirror: {upstream: shadow}
`))
	for _, tc := range []struct{ method, target, body string }{
		{"GET", "/api/items?page=2&q=a%20b", ""},
		{"POST", "/api/items", `{"name":"widget"}`},
		{"PUT", "/api/items/7", strings.Repeat("x", 40<<10)}, // within the buffered body limit (64 KiB)
		{"DELETE", "/api/items/7", ""},
	} {
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		req, _ := http.NewRequest(tc.method, h.base+tc.target, body)
		req.Header.Set("X-Trace", "t-"+tc.method)
		req.Header.Set("X-Request-Id", "req-"+tc.method)
		req.Header.Set("Levee-Mirror", "0") // a client's value is replaced on the copy
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "primary" || resp.Header.Get("X-Backend") != "primary" {
			t.Fatalf("%s %s: %d %q, want the primary's 200", tc.method, tc.target, resp.StatusCode, b)
		}
		var s seen
		select {
		case s = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %s: the shadow received no copy", tc.method, tc.target)
		}
		if s.method != tc.method || s.target != tc.target || s.body != tc.body {
			t.Errorf("copy: %s %s body %d bytes, want %s %s body %d bytes", s.method, s.target, len(s.body), tc.method, tc.target, len(tc.body))
		}
		if s.host != hostPort(shadow) {
			t.Errorf("copy Host %q, want the shadow's %q", s.host, hostPort(shadow))
		}
		for k, want := range map[string]string{"Levee-Mirror": "1", "X-Trace": "t-" + tc.method, "X-Request-Id": "req-" + tc.method} {
			if v := s.header.Values(k); len(v) != 1 || v[0] != want {
				t.Errorf("copy %s: %q, want %q", k, v, want)
			}
		}
	}
	if hits.Load() != 4 {
		t.Errorf("primary hits %d, want 4", hits.Load())
	}
	waitFor(t, "4 copies counted sent", func() bool { return h.metricIs(`levee_mirror_requests_total{result="sent",route="api"}`, 4) })
	for _, r := range []string{"failed", "skipped_cap", "skipped_memory", "skipped_body"} {
		if v := h.metric(`levee_mirror_requests_total{result="` + r + `",route="api"}`); v != 0 {
			t.Errorf("result %s = %v, want 0", r, v)
		}
	}
	var page struct{ Routes []admin.RouteView }
	adminGet(t, h, "/api/v1/routes", &page)
	routes := page.Routes
	if len(routes) != 1 || routes[0].Mirror == nil || *routes[0].Mirror != (admin.MirrorView{Upstream: "shadow", Percent: 100, MaxInFlight: 16, Timeout: "5s"}) {
		t.Errorf("GET /api/v1/routes mirror = %+v, want shadow 100%% 16 5s", routes[0].Mirror)
	}
}

// TestMirrorHeaderNotForwarded: a client's Levee-Mirror (and a second
// value of it) never reaches a primary upstream, on a route with a mirror
// and on one without: only levee marks a copy. The shadow's copy carries
// levee's single "1".
func TestMirrorHeaderNotForwarded(t *testing.T) {
	primary, primarySeen := shadowServer(t)
	shadow, got := shadowServer(t)
	h := start(t, mirrorConfig(hostPort(primary), hostPort(shadow), `
  - name: mirrored
    match: {path_prefix: /mirrored}
    upstream: primary
    mirror: {upstream: shadow}
  - name: plain
    match: {path_prefix: /plain}
    upstream: primary
`))
	for _, path := range []string{"/mirrored", "/plain"} {
		req, _ := http.NewRequest("GET", h.base+path, nil)
		req.Header["Levee-Mirror"] = []string{"1", "client"}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d, want 200", path, resp.StatusCode)
		}
		var s seen
		select {
		case s = <-primarySeen:
		default:
			t.Fatalf("GET %s: the primary recorded no request", path) // it records before answering
		}
		if v, ok := s.header["Levee-Mirror"]; ok {
			t.Errorf("GET %s: the primary received Levee-Mirror %q, want none", path, v)
		}
	}
	select {
	case s := <-got:
		if v := s.header.Values("Levee-Mirror"); len(v) != 1 || v[0] != "1" || s.target != "/mirrored" {
			t.Errorf("copy of %s: Levee-Mirror %q, want one copy of /mirrored marked [1]", s.target, v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the shadow received no copy of /mirrored")
	}
}

// TestMirrorPercent: percent 12.5 copies exactly 50 of 400 requests (the
// choice is a counter, not a coin), 2.5 exactly 10.
func TestMirrorPercent(t *testing.T) {
	primary, _ := backend(t, "primary")
	shadow, got := shadowServer(t)
	h := start(t, mirrorConfig(hostPort(primary), hostPort(shadow), `
  - {name: eighth, match: {path_prefix: /a}, upstream: primary, mirror: {upstream: shadow, percent: 12.5, max_in_flight: 1000}}
  - {name: few, match: {path_prefix: /b}, upstream: primary, mirror: {upstream: shadow, percent: 2.5, max_in_flight: 1000}}
`))
	for i := range 400 {
		for _, p := range []string{"/a/", "/b/"} {
			if st, _ := h.send("GET", fmt.Sprintf("%s%d", p, i), nil); st != 200 {
				t.Fatalf("GET %s%d: %d", p, i, st)
			}
		}
	}
	waitFor(t, "50 and 10 copies sent", func() bool {
		return h.metricIs(`levee_mirror_requests_total{result="sent",route="eighth"}`, 50) &&
			h.metricIs(`levee_mirror_requests_total{result="sent",route="few"}`, 10)
	})
	byPrefix := map[string]int{}
	for range 60 {
		s := <-got
		byPrefix[s.target[:2]]++
	}
	if byPrefix["/a"] != 50 || byPrefix["/b"] != 10 {
		t.Errorf("the shadow received %v, want /a 50 and /b 10", byPrefix)
	}
	t.Logf("copies: /a %d of 400 (12.5%%), /b %d of 400 (2.5%%)", byPrefix["/a"], byPrefix["/b"])
}

// TestMirrorCapHolds: a shadow that holds every request, with
// max_in_flight 2: at most 2 copies reach it, the rest are skipped and
// counted, and every primary request is answered at once. Once the shadow
// lets go, the copies end and their slots free.
func TestMirrorCapHolds(t *testing.T) {
	primary, _ := backend(t, "primary")
	release := make(chan struct{})
	var inShadow, most atomic.Int64
	shadow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inShadow.Add(1)
		defer inShadow.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(shadow.Close)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	h := start(t, mirrorConfig(hostPort(primary), hostPort(shadow), `
  - {name: api, match: {path_prefix: /}, upstream: primary, mirror: {upstream: shadow, max_in_flight: 2, timeout: 20s}}
`))
	// Every primary answer arrives while the shadow still holds its
	// copies (they are let go only after the loop): had the primary waited
	// for its copy, the first request would not have ended before the
	// mirror's 20 s timeout.
	for i := range 10 {
		if st, body := h.send("GET", fmt.Sprintf("/r%d", i), nil); st != 200 || body != "primary" {
			t.Fatalf("request %d: %d %q", i, st, body)
		}
	}
	waitFor(t, "2 copies held by the shadow", func() bool { return inShadow.Load() == 2 })
	if v := h.metric(`levee_mirror_requests_total{result="skipped_cap",route="api"}`); v != 8 {
		t.Errorf("skipped_cap = %v, want 8", v)
	}
	free()
	waitFor(t, "the 2 copies to end sent", func() bool { return h.metricIs(`levee_mirror_requests_total{result="sent",route="api"}`, 2) })
	if most.Load() != 2 {
		t.Errorf("at most %d copies at the shadow at once, want 2", most.Load())
	}
	// The slots are free again: the next request is copied.
	h.send("GET", "/after", nil)
	waitFor(t, "a third copy sent", func() bool { return h.metricIs(`levee_mirror_requests_total{result="sent",route="api"}`, 3) })
}

// TestMirrorSkipsStreamingBodies: a body of unknown length (chunked) or
// over the buffered limit streams to the primary whole and is not copied
// (skipped_body); a bodiless request beside them is.
func TestMirrorSkipsStreamingBodies(t *testing.T) {
	var primaryGot sync.Map
	primary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		primaryGot.Store(r.URL.Path, len(b))
	}))
	t.Cleanup(primary.Close)
	shadow, got := shadowServer(t)
	h := start(t, mirrorConfig(hostPort(primary), hostPort(shadow), `
  - {name: api, match: {path_prefix: /}, upstream: primary, mirror: {upstream: shadow}}
`))
	chunked := io.MultiReader(strings.NewReader("part one, "), strings.NewReader("part two")) // no length: chunked
	if st, _ := h.send("POST", "/chunked", chunked); st != 200 {
		t.Fatalf("chunked POST: %d", st)
	}
	big := strings.Repeat("b", 64<<10+1) // over the default replay_body_limit (64 KiB)
	if st, _ := h.send("POST", "/big", strings.NewReader(big)); st != 200 {
		t.Fatalf("big POST: %d", st)
	}
	if st, _ := h.send("GET", "/plain", nil); st != 200 {
		t.Fatal("GET /plain")
	}
	for path, want := range map[string]int{"/chunked": 18, "/big": len(big)} {
		if n, _ := primaryGot.Load(path); n != want {
			t.Errorf("primary got %v bytes of %s, want %d", n, path, want)
		}
	}
	waitFor(t, "one copy sent", func() bool { return h.metricIs(`levee_mirror_requests_total{result="sent",route="api"}`, 1) })
	if v := h.metric(`levee_mirror_requests_total{result="skipped_body",route="api"}`); v != 2 {
		t.Errorf("skipped_body = %v, want 2", v)
	}
	if s := <-got; s.target != "/plain" {
		t.Errorf("the shadow got %s, want /plain", s.target)
	}
}

// TestMirrorShadowDown: a shadow nobody listens on fails every copy
// (counted failed) while the primary answers every request; the
// primary's endpoint is not marked (its requests all succeed and its
// upstream's retries stay 0).
func TestMirrorShadowDown(t *testing.T) {
	primary, hits := backend(t, "primary")
	h := start(t, mirrorConfig(hostPort(primary), closedPort(t), `
  - {name: api, match: {path_prefix: /}, upstream: primary, mirror: {upstream: shadow}}
`))
	for i := range 20 {
		if st, body := h.send("GET", fmt.Sprintf("/r%d", i), nil); st != 200 || body != "primary" {
			t.Fatalf("request %d: %d %q", i, st, body)
		}
	}
	waitFor(t, "20 copies failed", func() bool { return h.metricIs(`levee_mirror_requests_total{result="failed",route="api"}`, 20) })
	if hits.Load() != 20 {
		t.Errorf("primary hits %d, want 20", hits.Load())
	}
	h.noCount(`levee_retries_total{reason="connect_failure",upstream="primary"}`)
}

// TestMirrorShedFirstUnderMemoryPressure: with the live heap grown past
// the soft watermark (a ballast), the copy is skipped and counted
// skipped_memory while the primary (a normal-priority route) still
// answers; once the ballast is freed, copies go again.
func TestMirrorShedFirstUnderMemoryPressure(t *testing.T) {
	primary, _ := backend(t, "primary")
	shadow, _ := shadowServer(t)
	const mib = 1 << 20
	runtime.GC()
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	// The soft watermark 64 MiB above the heap now, the hard one far above:
	// a 160 MiB ballast lands between them.
	soft := float64(live[0].Value.Uint64()+64*mib) / (1 << 30)
	h := start(t, strings.Replace(mirrorConfig(hostPort(primary), hostPort(shadow), `
  - {name: api, match: {path_prefix: /}, upstream: primary, mirror: {upstream: shadow}}
`), "log: {access: false}\n", fmt.Sprintf("log: {access: false}\nmemory: {limit: 1GiB, soft_watermark: %.4f, hard_watermark: 0.9}\n", soft), 1))
	waitFor(t, "no memory pressure", func() bool { return h.metricIs(`levee_memory_pressure_level`, 0) })
	h.send("GET", "/before", nil)
	waitFor(t, "a copy sent", func() bool { return h.metricIs(`levee_mirror_requests_total{result="sent",route="api"}`, 1) })

	ballast := make([]byte, 160*mib) // live once a collection marks it; never touched, so cheap
	waitFor(t, "soft pressure", func() bool {
		runtime.GC() // the guard reads the live heap, known after a collection
		return h.metricIs(`levee_memory_pressure_level`, 1)
	})
	for i := range 5 {
		if st, body := h.send("GET", fmt.Sprintf("/under/%d", i), nil); st != 200 || body != "primary" {
			t.Errorf("primary under soft pressure: %d %q", st, body)
		}
	}
	if v := h.metric(`levee_mirror_requests_total{result="skipped_memory",route="api"}`); v != 5 {
		t.Errorf("skipped_memory = %v, want 5", v)
	}
	runtime.KeepAlive(ballast)
	ballast = nil
	waitFor(t, "pressure to clear", func() bool {
		runtime.GC()
		return h.metricIs(`levee_memory_pressure_level`, 0)
	})
	h.send("GET", "/after", nil)
	waitFor(t, "copies going again", func() bool { return h.metricIs(`levee_mirror_requests_total{result="sent",route="api"}`, 2) })
}

// TestMirrorReloadKeepsCap: a reload that keeps the route's mirror keeps
// its copies in flight counted against the cap.
func TestMirrorReloadKeepsCap(t *testing.T) {
	primary, _ := backend(t, "primary")
	release := make(chan struct{})
	var inShadow atomic.Int64
	shadow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inShadow.Add(1)
		defer inShadow.Add(-1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(shadow.Close)
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	cfg := mirrorConfig(hostPort(primary), hostPort(shadow), `
  - {name: api, match: {path_prefix: /}, upstream: primary, mirror: {upstream: shadow, max_in_flight: 1, timeout: 20s}}
`)
	h := start(t, cfg)
	h.send("GET", "/one", nil)
	waitFor(t, "one copy held", func() bool { return inShadow.Load() == 1 })
	reload(t, h, cfg+"  - {name: other, match: {path_prefix: /other}, upstream: primary}\n")
	h.send("GET", "/two", nil)
	if v := h.metric(`levee_mirror_requests_total{result="skipped_cap",route="api"}`); v != 1 {
		t.Errorf("skipped_cap after the reload = %v, want 1 (the cap carried over)", v)
	}
	once.Do(func() { close(release) })
	waitFor(t, "the held copy sent", func() bool { return h.metricIs(`levee_mirror_requests_total{result="sent",route="api"}`, 1) })
}
