package upstream

// RetainEndpoints closes the pooled connections (HTTP/2 pool and fast
// path) to the endpoints live does not report, as when they leave the
// upstream's set: idle ones at once, busy ones when their requests end.
// Without it an idle connection to a removed endpoint stays open until its
// idle timeout. The standard pool's idle connections (requests with a
// body over HTTP/1.1) still expire at the idle timeout: net/http closes
// idle connections only all at once. Not on the request path: the gateway
// calls it when an upstream's endpoint set changes.
func (t *Transport) RetainEndpoints(live func(addr string) bool) {
	if t.h2 != nil {
		t.h2.retain(live)
	}
	t.h1.retain(live)
}

// retain closes the connections to the endpoints live does not report:
// idle ones at once, busy ones when their last stream ends (no new stream
// is taken on them; release's prune closes them). Work: one pass over the
// endpoints the pool holds.
func (p *h2Pool) retain(live func(addr string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, ep := range p.eps {
		if live(addr) {
			continue
		}
		kept := ep.conns[:0]
		for _, c := range ep.conns {
			if c.inflight == 0 {
				_ = c.cc.Close()
				continue
			}
			c.cc.SetDoNotReuse()
			kept = append(kept, c)
		}
		clear(ep.conns[len(kept):])
		ep.conns = kept
		ep.notify()
		if len(ep.conns) == 0 && ep.dialing == 0 && ep.waiting == 0 {
			delete(p.eps, addr) // bounded by the endpoints in use
		}
	}
}

// retain closes the idle connections to the endpoints live does not
// report and drops their stacks, so connections in flight to them are
// closed when they come back instead of pooled (put sees dropped).
func (p *h1Pool) retain(live func(addr string) bool) {
	var dead []*h1Conn
	p.mu.Lock()
	old := *p.eps.Load()
	gone := 0
	for addr := range old {
		if !live(addr) {
			gone++
		}
	}
	if gone == 0 { // the usual case (a health change, a reload that kept the set): no copy
		p.mu.Unlock()
		return
	}
	m := make(map[string]*h1Idle, len(old)-gone)
	for addr, e := range old {
		if live(addr) {
			m[addr] = e
			continue
		}
		e.mu.Lock()
		e.dropped = true
		dead = append(dead, e.conns...)
		e.conns = nil
		e.mu.Unlock()
	}
	p.eps.Store(&m)
	p.mu.Unlock()
	for _, c := range dead {
		_ = c.nc.Close()
	}
}
