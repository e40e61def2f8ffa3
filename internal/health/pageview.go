package health

import "time"

// Views for a page of endpoints: the admin API lists an upstream's
// endpoints a page at a time (up to 100,000 of them), so it must not ask
// View for every endpoint's view to show a few hundred of them.

// Status returns upstream name's panic state and ejection counts, without
// its endpoints (Endpoints nil); ok is false for an unknown upstream.
// O(number of ejection reasons).
func (m *Manager) Status(name string) (v UpstreamView, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.mu.ups[name]
	if u == nil {
		return v, false
	}
	v = UpstreamView{Panic: u.panic, PanicTotal: u.panics, EjectionsTotal: make(map[string]uint64, len(u.ejects))}
	for k, n := range u.ejects {
		v.EjectionsTotal[k] = n
	}
	return v, true
}

// EndpointViews returns, appended to dst[:0], the health of upstream
// name's endpoints at addrs, in the order of addrs: the view of an address
// the manager does not know (or of an unknown upstream) has Address "".
// It holds the manager's lock for len(addrs) map lookups; callers bound
// addrs (the admin API asks for a few hundred at a time).
func (m *Manager) EndpointViews(name string, addrs []string, dst []EndpointView) []EndpointView {
	dst = dst[:0]
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.mu.ups[name]
	for _, addr := range addrs {
		var mb *member
		if u != nil {
			mb = u.members[addr]
		}
		if mb == nil {
			dst = append(dst, EndpointView{})
			continue
		}
		dst = append(dst, u.viewOf(mb, now))
	}
	return dst
}

// viewOf is mb's view at now, as View shows it.
func (u *upstream) viewOf(mb *member, now time.Time) EndpointView {
	eff := uint32(0)
	if mb.serving() || u.panic && mb.weight > 0 {
		eff, _ = rampWeight(mb.weight, mb.rampFrom, u.opts.SlowStart, now)
		if u.panic {
			eff = mb.weight
		}
	}
	return EndpointView{
		Address: mb.addr, Weight: mb.weight, Effective: eff, State: mb.currentState(u.opts.SlowStart, now),
		Ejections: mb.ejections, LastReason: mb.reason, Since: mb.since,
	}
}
