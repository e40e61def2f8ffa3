package gateway

import (
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/proxy"
)

// proxyMirror maps a route's `mirror` to the proxy's (mirror.go there),
// over the table's upstreams; nil when the route mirrors nothing. A route
// that mirrored in the serving table hands its count of copies in flight
// on (MirrorOptions.Prev), so a reload does not lift the cap.
func (g *Gateway) proxyMirror(rc *config.Route, upstreams map[string]*proxy.Upstream) *proxy.Mirror {
	mc := rc.Mirror
	if mc == nil || upstreams[mc.Upstream] == nil {
		return nil
	}
	o := proxy.MirrorOptions{Upstream: upstreams[mc.Upstream], PerTenThousand: mc.MirrorPerTenThousand(),
		MaxInFlight: mc.MaxInFlight, Timeout: mc.Timeout}
	if g.handler != nil {
		for _, old := range g.handler.Table().Routes() { // O(routes), once per mirrored route per build
			if old.Name == rc.Name {
				o.Prev = old.Mirror
				break
			}
		}
	}
	return proxy.NewMirror(o)
}
