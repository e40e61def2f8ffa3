package proxy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRouteMetricsReusedAcrossTables: a table built after another reuses
// the routeMetrics of every route whose name and upstream are unchanged
// (a reload does not rebuild 6 KiB a route), builds new ones for a route
// whose upstream changed, keeps only the latest table's in the cache, and
// a forgotten route (its series deleted) starts anew.
func TestRouteMetricsReusedAcrossTables(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	up, other := &Upstream{Name: "up"}, &Upstream{Name: "other"}
	table := func(routes ...*Route) *Table { return NewTable(routes, []*Upstream{up, other}, m) }
	a1, b1 := &Route{Name: "a", PathPrefix: "/a/", Upstream: up}, &Route{Name: "b", PathPrefix: "/b/", Upstream: up}
	table(a1, b1)
	a2, b2 := &Route{Name: "a", PathPrefix: "/a/", Upstream: up}, &Route{Name: "b", PathPrefix: "/b/", Upstream: other}
	table(a2, b2)
	if a2.metrics != a1.metrics {
		t.Error("route a, unchanged, got new metrics")
	}
	if b2.metrics == b1.metrics || b2.metrics.upstream != "other" {
		t.Errorf("route b, moved to upstream other, kept its metrics (upstream %q)", b2.metrics.upstream)
	}
	if n := len(m.routeCache.m); n != 3 { // a, b and the no-route entry
		t.Errorf("cache holds %d entries after a table of 2 routes, want 3", n)
	}
	a2.metrics.count(200)
	// ForgetRoute while the cache still has the route (as after a table
	// that kept it): the next table must not reuse it.
	m.ForgetRoute("a")
	a3 := &Route{Name: "a", PathPrefix: "/a/", Upstream: up}
	table(a3, &Route{Name: "b", PathPrefix: "/b/", Upstream: other})
	if a3.metrics == a1.metrics {
		t.Error("route a, forgotten and added again, reused its old metrics")
	}
	if v := testutil.ToFloat64(a3.metrics.code(200)); v != 0 {
		t.Errorf("route a, added again, counts 200s from %g: a cached counter of its deleted series", v)
	}
	if v := testutil.ToFloat64(m.requests.WithLabelValues("a", "up", "200")); v != 0 {
		t.Errorf("levee_requests_total of route a, added again: %g, want 0", v)
	}
}
