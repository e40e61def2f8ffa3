package gateway

import "github.com/levee-gw/levee/internal/proxy"

// swapTable serves t from now on and deletes the series of the routes and
// upstreams the previous table had and t has not (proxy.Dropped). Callers
// hold g.mu (or are starting).
func (g *Gateway) swapTable(t *proxy.Table) {
	old := g.handler.Table()
	g.handler.Swap(t)
	routes, upstreams := proxy.Dropped(old, t)
	for _, name := range routes {
		g.metrics.ForgetRoute(name)
		if g.dataMetrics != nil {
			g.dataMetrics.ForgetRoute(name)
		}
	}
	for _, name := range upstreams {
		g.metrics.ForgetUpstream(name)
	}
}
