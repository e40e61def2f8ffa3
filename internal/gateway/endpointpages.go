package gateway

import (
	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/health"
)

// The admin API's upstream reads (admin/upstreams.go): the endpoints a
// page at a time, in address order, by health.Pager.

// Upstreams returns the serving upstreams in order, without endpoints.
func (v adminView) Upstreams() []admin.UpstreamView {
	t := v.g.handler.Table()
	g := v.g
	g.mu.Lock()
	cfg := g.cfg
	g.mu.Unlock()
	out := make([]admin.UpstreamView, 0, len(t.Upstreams()))
	for _, up := range t.Upstreams() {
		uv := admin.UpstreamView{Name: up.Name}
		if uc := cfg.Upstreams[up.Name]; uc != nil {
			uv.Balancer = uc.Balancer
		}
		if f := v.feed(up.Name); f != nil {
			uv.Discovery = f.view()
		}
		hv, _ := g.health.Status(up.Name)
		uv.Panic, uv.PanicTotal = hv.Panic, hv.PanicTotal
		out = append(out, uv)
	}
	return out
}

// Endpoints implements admin.Gateway.Endpoints over the serving table.
func (v adminView) Endpoints(name, after string, limit int, fn func(admin.EndpointView) bool) (admin.EndpointsPage, bool) {
	t := v.g.handler.Table()
	up := t.Upstream(name)
	if up == nil {
		return admin.EndpointsPage{}, false
	}
	serving := func(n string) bool { return t.Upstream(n) != nil }
	total, more := v.g.endpointPager.Page(v.g.health, name, up.Balance().Endpoints, after, limit, serving, len(t.Upstreams()),
		func(ep *endpoint.Endpoint, h health.EndpointView) bool { return fn(endpointView(ep, h)) })
	return admin.EndpointsPage{Total: total, More: more}, true
}

// endpointView is ep as the API shows it, with its health h (Address ""
// when the health manager does not know it).
func endpointView(ep *endpoint.Endpoint, h health.EndpointView) admin.EndpointView {
	ev := admin.EndpointView{
		Address: ep.Address, Weight: weightUnits(ep.Weight), EffectiveWeight: weightUnits(ep.Weight), Zone: ep.Zone, State: "healthy",
		Inflight: ep.Stats.Inflight.Load(), Requests: ep.Stats.Requests.Load(), Failures: ep.Stats.Failures.Load(),
	}
	if h.Address != "" {
		ev.Weight, ev.State, ev.Ejections, ev.LastReason, ev.Since = weightUnits(h.Weight), string(h.State), h.Ejections, h.LastReason, h.Since
	} else if ep.Weight == 0 {
		ev.State = string(health.Drained)
	}
	return ev
}
