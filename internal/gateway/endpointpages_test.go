package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// bigUpstreamConfig is a levee with one push upstream, pushed.
const bigUpstreamConfig = `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  pushed: {discovery: {push: true}}
routes:
  - {name: all, match: {path_prefix: /}, upstream: pushed}
`

// bigPush pushes n distinct endpoints to upstream pushed of h, in a
// shuffled order (so that the pages' address order is levee's own), and
// waits until they serve. It returns the addresses.
func bigPush(t *testing.T, h *harness, n int) map[string]bool {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.%d.%d.%d:%d", i>>16&255, i>>8&255, i&255, 8000+i%7)
	}
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	var b strings.Builder
	b.WriteByte('[')
	want := make(map[string]bool, n)
	for i, a := range addrs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"address":%q}`, a)
		want[a] = true
	}
	b.WriteByte(']')
	if st, doc := pushEndpoints(t, h, "pushed", b.String()); st != 200 {
		t.Fatalf("pushing %d endpoints: %d %v", n, st, doc)
	}
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		var doc struct{ Total int }
		getJSON(t, h.admin+"/api/v1/upstreams/pushed/endpoints?limit=1", &doc)
		return doc.Total == n, fmt.Sprintf("the upstream serves %d endpoints, want %d", doc.Total, n)
	})
	return want
}

// TestEndpointPagesOfPushedUpstream: a real levee with a push upstream of
// 100,000 endpoints (discovery's MaxInstances, the figure): the
// walk through /api/v1/upstreams/pushed/endpoints by its next links, at
// the largest page, returns the 100,000 endpoints, each once, in address
// order, with the total on every page; GET /api/v1/upstreams shows the
// first 1000 with the total and the link to the next page.
func TestEndpointPagesOfPushedUpstream(t *testing.T) {
	const n = 100_000
	h := start(t, bigUpstreamConfig)
	want := bigPush(t, h, n)

	seen := make(map[string]bool, n)
	last, pages, bytes := "", 0, 0
	t0 := time.Now()
	for path := "/api/v1/upstreams/pushed/endpoints?limit=10000"; path != ""; pages++ {
		if pages > n/10000 {
			t.Fatalf("more than %d pages", n/10000)
		}
		resp, err := h.client.Get(h.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v %.300s", path, resp.StatusCode, err, body)
		}
		bytes += len(body)
		var doc struct {
			Upstream  string
			Endpoints []struct{ Address, State string }
			Total     int
			Next      string
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if doc.Upstream != "pushed" || doc.Total != n {
			t.Fatalf("GET %s: upstream %q total %d", path, doc.Upstream, doc.Total)
		}
		for _, e := range doc.Endpoints {
			if !want[e.Address] || seen[e.Address] || e.Address <= last || e.State != "healthy" {
				t.Fatalf("GET %s: endpoint %s (state %s) after %s: not pushed, seen before or out of order", path, e.Address, e.State, last)
			}
			seen[e.Address], last = true, e.Address
		}
		path = doc.Next
	}
	t.Logf("walked %d endpoints in %d pages of 10000: %d bytes of JSON in %v", len(seen), pages, bytes, time.Since(t0).Round(time.Millisecond))
	if len(seen) != n || pages != n/10000 {
		t.Fatalf("the walk listed %d distinct endpoints in %d pages, want %d in %d", len(seen), pages, n, n/10000)
	}

	var list struct {
		Upstreams []struct {
			Name           string
			Endpoints      []struct{ Address string }
			EndpointsTotal int    `json:"endpoints_total"`
			EndpointsNext  string `json:"endpoints_next"`
		}
	}
	getJSON(t, h.admin+"/api/v1/upstreams", &list)
	if len(list.Upstreams) != 1 {
		t.Fatalf("%d upstreams", len(list.Upstreams))
	}
	u := list.Upstreams[0]
	if len(u.Endpoints) != 1000 || u.EndpointsTotal != n || !strings.HasPrefix(u.EndpointsNext, "/api/v1/upstreams/pushed/endpoints?after=") ||
		!strings.HasSuffix(u.EndpointsNext, "&limit=1000") || !strings.Contains(u.EndpointsNext, u.Endpoints[999].Address) {
		t.Errorf("GET /api/v1/upstreams: %d endpoints, total %d, next %q", len(u.Endpoints), u.EndpointsTotal, u.EndpointsNext)
	}
	// After the last address, and after an address that sorts beyond
	// every endpoint: an empty page, no next.
	for _, after := range []string{last, "99.0.0.0:1"} {
		var doc struct {
			Endpoints []json.RawMessage
			Total     int
			Next      *string
		}
		getJSON(t, h.admin+"/api/v1/upstreams/pushed/endpoints?after="+after, &doc)
		if len(doc.Endpoints) != 0 || doc.Total != n || doc.Next != nil {
			t.Errorf("after %s: %d endpoints, total %d, next %v; want none, %d, no next", after, len(doc.Endpoints), doc.Total, doc.Next, n)
		}
	}
	resp, err := h.client.Get(h.admin + "/api/v1/upstreams/pushed/endpoints?limit=10001")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `limit: must be a whole number from 1 to 10000, got \"10001\"`) {
		t.Errorf("limit 10001: %d %s", resp.StatusCode, b)
	}
}

// TestQuarantinedShownBounded: an update whose rejected instances outnumber
// MaxQuarantinedShown shows that many, and counts them all.
func TestQuarantinedShownBounded(t *testing.T) {
	h := start(t, bigUpstreamConfig)
	var parts []string
	for i := range 250 {
		if i%5 < 3 {
			parts = append(parts, fmt.Sprintf(`{"address": "bad address %d"}`, i))
		} else {
			parts = append(parts, fmt.Sprintf(`{"address": "10.1.%d.%d:80"}`, i/200, i%200))
		}
	}
	if st, doc := pushEndpoints(t, h, "pushed", "["+strings.Join(parts, ",")+"]"); st != 200 {
		t.Fatalf("push: %d %v", st, doc)
	}
	var view struct {
		EndpointsTotal int `json:"endpoints_total"`
		Discovery      struct {
			Quarantined      []struct{ Key, Reason string }
			QuarantinedTotal int `json:"quarantined_total"`
		}
	}
	getJSON(t, h.admin+"/api/v1/upstreams/pushed", &view)
	if view.EndpointsTotal != 100 || len(view.Discovery.Quarantined) != 100 || view.Discovery.QuarantinedTotal != 150 {
		t.Errorf("%d endpoints, %d quarantined shown of %d; want 100, 100 of 150", view.EndpointsTotal, len(view.Discovery.Quarantined), view.Discovery.QuarantinedTotal)
	}
}
