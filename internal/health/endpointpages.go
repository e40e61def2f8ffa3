package health

import (
	"cmp"
	"slices"
	"sort"
	"sync"

	"github.com/levee-gw/levee/internal/endpoint"
)

// The admin API's upstream reads (admin/upstreams.go), a page at a time.
// An upstream may have 100,000 endpoints; a read used to build every
// endpoint's view (and the manager's, and a map of them) to show them
// all. Now a read takes one page, in address order, in chunks of
// pageChunk views: the manager is asked for a chunk's addresses only,
// under its lock, and the views are handed to the writer with no lock
// held.
//
// ORDER. An upstream's endpoints are in the registry's or the file's
// order. A page that holds them all (no after, at most limit of them:
// every static upstream at the default limit) lists them in that order,
// as the API did before paging. Any other page is in address order: keyset
// paging needs one order that does not depend on the snapshot, so each
// endpoint set (an immutable slice: a health change or a new set swaps the
// upstream's Balance, and with it the slice) gets an index sorted by
// address, built once per set (at most one sort, O(n log n), per swap that
// a read sees) and kept in the Pager, one entry per upstream name, pruned
// to the serving upstreams.

// pageChunk is the endpoint views built per manager call.
const pageChunk = 256

// Pager pages upstreams' endpoints with their health. The zero value is
// ready; safe for concurrent use.
type Pager struct {
	mu struct {
		sync.Mutex
		m map[string]*endpointOrder
	}
}

// endpointOrder is one endpoint set's indexes by address; idx nil when
// they are in address order already.
type endpointOrder struct {
	set  **endpoint.Endpoint // the set's identity: its first element
	n    int
	once sync.Once
	idx  []int32
}

// Page calls fn with each endpoint of upstream name's set eps on the page
// after the address after (none: from the start) of at most limit
// endpoints, with m's view of it (Address "" when m does not know it),
// until fn returns false. It returns the set's size and whether endpoints
// follow the page. serving reports whether an upstream still serves and
// upstreams how many do (the order cache's bound).
func (p *Pager) Page(m *Manager, name string, eps []*endpoint.Endpoint, after string, limit int,
	serving func(name string) bool, upstreams int, fn func(*endpoint.Endpoint, EndpointView) bool) (total int, more bool) {
	var order []int32
	if after != "" || len(eps) > limit {
		order = p.order(name, eps, serving, upstreams)
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
	addrs := make([]string, 0, pageChunk)
	var hv []EndpointView
	for lo := start; lo < end; lo += pageChunk {
		hi := min(end, lo+pageChunk)
		addrs = addrs[:0]
		for i := lo; i < hi; i++ {
			addrs = append(addrs, at(i).Address)
		}
		hv = m.EndpointViews(name, addrs, hv)
		for i := lo; i < hi; i++ {
			if !fn(at(i), hv[i-lo]) {
				return len(eps), end < len(eps)
			}
		}
	}
	return len(eps), end < len(eps)
}

// order returns the address order of eps, upstream name's set: nil when
// eps is sorted already, else indexes into it. The sort runs outside the
// map's lock, once per set.
func (p *Pager) order(name string, eps []*endpoint.Endpoint, serving func(string) bool, upstreams int) []int32 {
	if len(eps) == 0 {
		return nil
	}
	p.mu.Lock()
	if p.mu.m == nil {
		p.mu.m = map[string]*endpointOrder{}
	}
	e := p.mu.m[name]
	if e == nil || e.set != &eps[0] || e.n != len(eps) {
		e = &endpointOrder{set: &eps[0], n: len(eps)}
		p.mu.m[name] = e
		// Bounded by the upstreams serving: entries of upstreams a reload
		// removed go when another is added.
		if len(p.mu.m) > upstreams {
			for n := range p.mu.m {
				if !serving(n) {
					delete(p.mu.m, n)
				}
			}
		}
	}
	p.mu.Unlock()
	e.once.Do(func() { e.idx = addressOrder(eps) })
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
