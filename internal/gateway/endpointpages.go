package gateway

import (
	"cmp"
	"slices"
	"sort"
	"sync"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/health"
	"github.com/levee-gw/levee/internal/proxy"
)

// The admin API's upstream reads (admin/upstreams.go), a page at a time.
// An upstream may have 100,000 endpoints; a read used to build every
// endpoint's view (and the health manager's, and a map of them) to show
// them all. Now a read takes one page, in address order, in chunks of
// pageChunk views: the health manager is asked for a chunk's addresses
// only, under its lock, and the views are handed to the writer with no
// lock held.
//
// ORDER. A Balance's endpoints are in the registry's or the file's order.
// A page that holds them all (no after, at most limit of them: every
// static upstream at the default limit) lists them in that order, as the
// API did before paging. Any other page is in address order: keyset
// paging needs one order that does not depend on the snapshot, so
// each upstream's Balance gets an index sorted by address, built once per
// Balance (a health change or a new set swaps the Balance: at most one
// sort, O(n log n), per swap that a read sees) and kept in endpointOrders,
// one entry per upstream name, pruned to the serving upstreams.

// pageChunk is the endpoint views built per health-manager call.
const pageChunk = 256

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
	bal := up.Balance()
	eps := bal.Endpoints
	var order []int32
	if after != "" || len(eps) > limit {
		order = v.g.endpointOrder.of(t, name, bal)
	} // else one page holds them all: in their own order, as before paging
	at := func(i int) *endpoint.Endpoint {
		if order == nil {
			return eps[i]
		}
		return eps[order[i]]
	}
	start := 0
	if after != "" {
		start = sort.Search(len(eps), func(i int) bool { return at(i).Address > after })
	}
	end := min(len(eps), start+max(limit, 0))
	page := admin.EndpointsPage{Total: len(eps), More: end < len(eps)}
	addrs := make([]string, 0, pageChunk)
	var hv []health.EndpointView
	for lo := start; lo < end; lo += pageChunk {
		hi := min(end, lo+pageChunk)
		addrs = addrs[:0]
		for i := lo; i < hi; i++ {
			addrs = append(addrs, at(i).Address)
		}
		hv = v.g.health.EndpointViews(name, addrs, hv)
		for i := lo; i < hi; i++ {
			if !fn(endpointView(at(i), hv[i-lo])) {
				return page, true
			}
		}
	}
	return page, true
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

// endpointOrders keeps, per upstream, the address order of its serving
// Balance's endpoints. The zero value is ready; safe for concurrent use.
type endpointOrders struct {
	mu struct {
		sync.Mutex
		m map[string]*endpointOrder
	}
}

// endpointOrder is one Balance's endpoints' indexes by address; idx nil
// when they are in address order already.
type endpointOrder struct {
	bal  *proxy.Balance
	once sync.Once
	idx  []int32
}

// of returns the address order of bal, upstream name's Balance in t: nil
// when bal's endpoints are sorted already, else indexes into them. The
// sort runs outside the map's lock, once per Balance.
func (o *endpointOrders) of(t *proxy.Table, name string, bal *proxy.Balance) []int32 {
	o.mu.Lock()
	if o.mu.m == nil {
		o.mu.m = map[string]*endpointOrder{}
	}
	e := o.mu.m[name]
	if e == nil || e.bal != bal {
		e = &endpointOrder{bal: bal}
		o.mu.m[name] = e
		// Bounded by the upstreams serving: entries of upstreams a reload
		// removed go when another is added.
		if len(o.mu.m) > len(t.Upstreams()) {
			for n := range o.mu.m {
				if t.Upstream(n) == nil {
					delete(o.mu.m, n)
				}
			}
		}
	}
	o.mu.Unlock()
	e.once.Do(func() { e.idx = addressOrder(bal.Endpoints) })
	return e.idx
}

// addressOrder returns eps's indexes sorted by address, or nil when eps is
// in that order already.
func addressOrder(eps []*endpoint.Endpoint) []int32 {
	if slices.IsSortedFunc(eps, func(a, b *endpoint.Endpoint) int { return cmp.Compare(a.Address, b.Address) }) {
		return nil
	}
	idx := make([]int32, len(eps)) // discovery caps an upstream at 100,000 endpoints
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int { return cmp.Compare(eps[a].Address, eps[b].Address) })
	return idx
}
