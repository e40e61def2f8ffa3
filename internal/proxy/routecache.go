package proxy

import "sync"

// routeMetricsCache keeps the routeMetrics of the latest table so that the
// next table reuses them for every route whose name and upstream are
// unchanged. A routeMetrics holds only resolved series (the same children
// WithLabelValues would return again) and counters per status code and
// reason, about 6 KiB a route: at 5,000 routes, building them anew made up
// a third of a reload's allocations and most of its peak. Bounded: the
// cache holds exactly the routes of the latest table built (plus its
// no-route entry); ForgetRoute drops a route's entries with its series.
type routeMetricsCache struct {
	mu sync.Mutex
	m  map[routeMetricsKey]*routeMetrics
}

type routeMetricsKey struct{ route, upstream string }

// routeMetricsBuild is one NewTable's use of the cache: reuse from the
// previous table, collect this one's.
type routeMetricsBuild struct {
	m    *Metrics
	next map[routeMetricsKey]*routeMetrics
}

// beginRouteMetrics starts a table build; n is its number of routes.
// The cache's lock is held until done, so two builds do not interleave.
func (m *Metrics) beginRouteMetrics(n int) *routeMetricsBuild {
	m.routeCache.mu.Lock()
	return &routeMetricsBuild{m: m, next: make(map[routeMetricsKey]*routeMetrics, n+1)}
}

// get returns the route's metrics, reused when the previous table had them.
func (b *routeMetricsBuild) get(route, upstream string) *routeMetrics {
	k := routeMetricsKey{route, upstream}
	rm := b.next[k]
	if rm == nil {
		rm = b.m.routeCache.m[k]
	}
	if rm == nil {
		rm = newRouteMetrics(b.m, route, upstream)
	}
	b.next[k] = rm
	return rm
}

// done makes this build's routes the cache and releases it.
func (b *routeMetricsBuild) done() {
	b.m.routeCache.m = b.next
	b.m.routeCache.mu.Unlock()
}

// forgetRouteMetrics drops route's cached metrics (its series are deleted:
// a route added again must declare them anew).
func (m *Metrics) forgetRouteMetrics(route string) {
	m.routeCache.mu.Lock()
	defer m.routeCache.mu.Unlock()
	for k := range m.routeCache.m {
		if k.route == route {
			delete(m.routeCache.m, k)
		}
	}
}
