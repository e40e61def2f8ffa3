package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// samples returns the samples of family on a /metrics page, keyed by their
// label set as written ({a="x",b="y"}; "" without labels).
func samples(page, family string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(page, "\n") {
		rest, ok := strings.CutPrefix(line, family)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		v, err := strconv.ParseFloat(rest[i+1:], 64)
		if err != nil {
			continue
		}
		out[strings.TrimSpace(rest[:i])] = v
	}
	return out
}

// failingBackend answers every request 500 and counts them.
func failingBackend(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestEndpointMetrics: each endpoint's attempts, 5xx and health state are
// reported under its own endpoint label for the first metrics.endpoint_labels
// endpoints by address, the rest summed under endpoint="other" (the sum
// equals the total), every series exists at 0 before any traffic, and
// in-flight attempts are counted while they last.
func TestEndpointMetrics(t *testing.T) {
	const n = 5
	var addrs []string
	hits := map[string]*atomic.Int64{}
	for i := range n {
		var srv *httptest.Server
		var h *atomic.Int64
		if i == 0 {
			srv, h = failingBackend(t)
		} else {
			srv, h = backend(t, fmt.Sprint("b", i))
		}
		addrs = append(addrs, hostPort(srv))
		hits[hostPort(srv)] = h
	}
	hang := hangingBackend(t)
	var eps []string
	for _, a := range addrs {
		eps = append(eps, "{address: "+a+"}")
	}
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
metrics: {endpoint_labels: 2}
upstreams:
  big: {endpoints: [%s]}
  hang: {endpoints: [{address: %s}]}
routes:
  - {name: hang, match: {path_prefix: /hang}, upstream: hang, retry: {attempts: 1}}
  - {name: big, match: {path_prefix: /}, upstream: big, retry: {attempts: 1}}
`, strings.Join(eps, ", "), hostPort(hang)))

	sorted := slices.Clone(addrs)
	slices.Sort(sorted)
	labelled, rest := sorted[:2], sorted[2:]
	key := func(up, ep string) string { return fmt.Sprintf(`{endpoint=%q,upstream=%q}`, ep, up) }

	// Before any traffic: the labelled endpoints and "other" at 0.
	page := h.metricsPage()
	reqs := samples(page, "levee_endpoint_requests_total")
	for _, ep := range append(slices.Clone(labelled), "other") {
		if v, ok := reqs[key("big", ep)]; !ok || v != 0 {
			t.Errorf("before traffic: requests of %s = %v (present %v), want 0", ep, v, ok)
		}
	}
	if len(reqs) != 4 { // big: 2 labelled + other; hang: its one endpoint
		t.Errorf("before traffic: %d requests series, want 4: %v", len(reqs), reqs)
	}

	const total = 40
	for range total {
		resp := h.get("/x")
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	page = h.metricsPage()
	reqs = samples(page, "levee_endpoint_requests_total")
	errs := samples(page, "levee_endpoint_errors_total")
	states := samples(page, "levee_endpoint_state")
	var sum float64
	for _, ep := range labelled {
		want := float64(hits[ep].Load())
		if got := reqs[key("big", ep)]; got != want {
			t.Errorf("requests of %s = %v, want %v (its hits)", ep, got, want)
		}
		sum += reqs[key("big", ep)]
		if got := states[fmt.Sprintf(`{endpoint=%q,state="healthy",upstream="big"}`, ep)]; got != 1 {
			t.Errorf("state healthy of %s = %v, want 1", ep, got)
		}
	}
	var restHits float64
	for _, ep := range rest {
		restHits += float64(hits[ep].Load())
		if _, ok := reqs[key("big", ep)]; ok {
			t.Errorf("%s has its own label beyond endpoint_labels=2", ep)
		}
	}
	if got := reqs[key("big", "other")]; got != restHits {
		t.Errorf(`requests of "other" = %v, want %v (the unlabelled endpoints' hits)`, got, restHits)
	}
	sum += reqs[key("big", "other")]
	if sum != total {
		t.Errorf("labelled + other = %v, want %d requests", sum, total)
	}
	if got := states[`{endpoint="other",state="healthy",upstream="big"}`]; got != n-2 {
		t.Errorf(`"other" healthy = %v, want %d`, got, n-2)
	}
	// The failing endpoint's 500s, wherever it is labelled.
	failing := addrs[0]
	where := "other"
	if slices.Contains(labelled, failing) {
		where = failing
	}
	want5xx := float64(hits[failing].Load())
	if want5xx == 0 {
		t.Fatal("the failing backend got no request")
	}
	if got := errs[fmt.Sprintf(`{endpoint=%q,kind="5xx",upstream="big"}`, where)]; got != want5xx {
		t.Errorf("5xx of %s = %v, want %v", where, got, want5xx)
	}

	// In flight: a request held by the hanging endpoint is counted until
	// the client leaves.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/hang", nil)
		if resp, err := h.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	inflight := func() float64 {
		return h.metric("levee_endpoint_inflight" + key("hang", hostPort(hang))) // fails when absent: 0 must be read, not assumed
	}
	waitFor(t, "in-flight 1", func() bool { return inflight() == 1 })
	cancel()
	<-done
	waitFor(t, "in-flight 0", func() bool { return inflight() == 0 })
}

// TestBytesMetrics: levee_request_bytes_total and levee_response_bytes_total
// exist at 0 for each route before any traffic, then count the body bytes
// read from clients and written to them, levee's own refusals included.
func TestBytesMetrics(t *testing.T) {
	be, _ := backend(t, "web") // answers its name: 3 bytes
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  web: {endpoints: [{address: %s}]}
routes:
  - {name: small, match: {path_prefix: /small}, upstream: web, max_body_bytes: 10}
  - {name: web, match: {path_prefix: /}, upstream: web}
`, hostPort(be)))
	page := h.metricsPage()
	for _, fam := range []string{"levee_request_bytes_total", "levee_response_bytes_total"} {
		for _, route := range []string{"small", "web"} {
			if v, ok := samples(page, fam)[fmt.Sprintf("{route=%q}", route)]; !ok || v != 0 {
				t.Errorf("before traffic: %s{route=%q} = %v (present %v), want 0", fam, route, v, ok)
			}
		}
	}
	post := func(path string, n int) (status int, body []byte) {
		resp, err := h.client.Post(h.base+path, "application/octet-stream", strings.NewReader(strings.Repeat("x", n)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	var wantOut float64
	for range 3 {
		status, body := post("/up", 1000)
		if status != 200 {
			t.Fatalf("status %d", status)
		}
		wantOut += float64(len(body))
	}
	status, refusal := post("/small", 100)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", status)
	}
	page = h.metricsPage()
	if got := samples(page, "levee_request_bytes_total")[`{route="web"}`]; got != 3000 {
		t.Errorf(`request bytes of web = %v, want 3000`, got)
	}
	if got := samples(page, "levee_response_bytes_total")[`{route="web"}`]; got != wantOut || got == 0 {
		t.Errorf(`response bytes of web = %v, want %v`, got, wantOut)
	}
	if got := samples(page, "levee_response_bytes_total")[`{route="small"}`]; got != float64(len(refusal)) {
		t.Errorf(`response bytes of small (a 413 refusal) = %v, want %d`, got, len(refusal))
	}
}

// TestEndpointMetricsChurn: as discovery replaces an upstream's endpoints,
// the labelled one that leaves frees its place for the next by address,
// which starts at 0 because its counts were already in "other", and
// "other" never goes down (what leavers contributed stays in it; a
// labelled leaver's own series ends).
func TestEndpointMetricsChurn(t *testing.T) {
	var addrs []string
	for i := range 4 {
		srv, _ := backend(t, fmt.Sprint("b", i))
		addrs = append(addrs, hostPort(srv))
	}
	slices.Sort(addrs)
	h := start(t, `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
metrics: {endpoint_labels: 1}
upstreams:
  pushed: {discovery: {push: true, max_drop_fraction: 1}}
routes:
  - {name: pushed, match: {path_prefix: /}, upstream: pushed, retry: {attempts: 1}}
`)
	push := func(eps ...string) {
		t.Helper()
		var items []string
		for _, a := range eps {
			items = append(items, fmt.Sprintf(`{"address": %q}`, a))
		}
		if status, doc := pushEndpoints(t, h, "pushed", "["+strings.Join(items, ",")+"]"); status != 200 {
			t.Fatalf("push: %d %v", status, doc)
		}
	}
	traffic := func(n int) {
		for range n {
			resp := h.get("/x")
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	key := func(ep string) string { return fmt.Sprintf(`{endpoint=%q,upstream="pushed"}`, ep) }
	scrape := func() map[string]float64 { return samples(h.metricsPage(), "levee_endpoint_requests_total") }

	push(addrs[0], addrs[1], addrs[2])
	traffic(30)
	before := scrape()
	if before[key(addrs[0])]+before[key("other")] != 30 {
		t.Fatalf("labelled + other = %v, want 30: %v", before[key(addrs[0])]+before[key("other")], before)
	}
	if _, ok := before[key(addrs[1])]; ok {
		t.Fatalf("%s labelled beyond endpoint_labels=1: %v", addrs[1], before)
	}
	// addrs[0] leaves: addrs[1], the next by address, takes its place from
	// 0; its counts so far stay in "other".
	push(addrs[1], addrs[2], addrs[3])
	after := scrape()
	if _, ok := after[key(addrs[0])]; ok {
		t.Errorf("%s left but still has a series: %v", addrs[0], after)
	}
	if got, ok := after[key(addrs[1])]; !ok || got != 0 {
		t.Errorf("%s labelled after it was in other = %v (present %v), want 0", addrs[1], got, ok)
	}
	if after[key("other")] < before[key("other")] {
		t.Errorf(`"other" went down: %v then %v`, before[key("other")], after[key("other")])
	}
	traffic(30)
	last := scrape()
	if last[key("other")] < after[key("other")] || last[key(addrs[1])] == 0 {
		t.Errorf("after more traffic: other %v (was %v), %s %v", last[key("other")], after[key("other")], addrs[1], last[key(addrs[1])])
	}
	// Everything is accounted for but the leaver's own series, which ended.
	if got, want := last[key(addrs[1])]+last[key("other")], 60-before[key(addrs[0])]; got != want {
		t.Errorf("labelled + other = %v after 60 requests, want %v (60 less the ended series)", got, want)
	}
}
