package gateway

import "github.com/levee-gw/levee/internal/proxy"

// swapTable serves t from now on and deletes the series of the routes and
// upstreams the previous table had and t has not. Without it, every name
// ever served keeps its series until the process ends: harmless for a
// file edited by hand, unbounded for data APIs created and deleted at
// runtime through the admin API. Callers hold g.mu (or are starting).
func (g *Gateway) swapTable(t *proxy.Table) {
	old := g.handler.Table()
	g.handler.Swap(t)
	if old == nil {
		return
	}
	routes := make(map[string]bool, len(t.Routes()))
	for _, rt := range t.Routes() {
		routes[rt.Name] = true
	}
	for _, rt := range old.Routes() {
		if !routes[rt.Name] {
			routes[rt.Name] = true // a name twice in old: forgotten once
			g.metrics.ForgetRoute(rt.Name)
			if g.dataMetrics != nil {
				g.dataMetrics.ForgetRoute(rt.Name)
			}
		}
	}
	ups := make(map[string]bool, len(t.Upstreams()))
	for _, u := range t.Upstreams() {
		ups[u.Name] = true
	}
	for _, u := range old.Upstreams() {
		if !ups[u.Name] {
			ups[u.Name] = true
			g.metrics.ForgetUpstream(u.Name)
		}
	}
}
