// The Manager's state transitions: outlier trips and refused-connect
// ejections, timed events (ejections ending, slow-start steps), and the
// coalescing of changed upstreams into rebuilds. Every function here needs
// Manager.mu held.

package health

import (
	"time"
)

// tripsLocked handles outlier signals: every member that refused a
// connection is ejected at once (upstreams with Refused set), and every
// tripped member of an upstream with outlier detection is ejected if its
// run still stands; each only if the ejection cap allows.
func (m *Manager) tripsLocked(now time.Time) {
	for _, u := range m.mu.ups {
		if u.opts.Refused != nil {
			for _, mb := range u.members {
				if mb.stats.TakeRefused() {
					m.ejectRefusedLocked(u, mb, now)
				}
			}
		}
		o := u.opts.Outlier
		if o == nil {
			continue
		}
		for _, mb := range u.members {
			if !mb.stats.TakeTrip() {
				continue
			}
			reason := ""
			switch {
			case o.ConsecutiveGatewayFailures > 0 && mb.stats.GatewayFailuresInARow.Load() >= o.ConsecutiveGatewayFailures:
				reason = "consecutive_gateway_failures"
			case o.Consecutive5xx > 0 && mb.stats.Status5xxInARow.Load() >= o.Consecutive5xx:
				reason = "consecutive_5xx"
			}
			if reason == "" || mb.ejected() || mb.weight == 0 {
				mb.stats.ResetRuns()
				continue
			}
			ejected, n := u.count()
			if !mayEject(ejected, n, o.MaxEjectionPercent) {
				mb.stats.ResetRuns() // trips again after another full run
				m.o.Logger.Debug("ejection skipped: max_ejection_percent reached", "upstream", u.name, "endpoint", mb.addr,
					"reason", reason, "ejected", ejected, "endpoints", n)
				continue
			}
			d := mb.eject(o, now)
			u.ejects[reason]++
			m.transitionLocked(mb, reason+" (ejected for "+d.String()+")", now)
		}
	}
}

// ejectRefusedLocked ejects mb, which refused a connection, for the
// Refused options' ejection time, if it serves and the ejection cap allows.
func (m *Manager) ejectRefusedLocked(u *upstream, mb *member, now time.Time) {
	if !mb.serving() {
		return // already out of rotation
	}
	ejected, n := u.count()
	if !mayEject(ejected, n, u.opts.Refused.MaxEjectionPercent) {
		m.o.Logger.Debug("ejection skipped: max_ejection_percent reached", "upstream", u.name, "endpoint", mb.addr,
			"reason", reasonRefused, "ejected", ejected, "endpoints", n)
		return
	}
	d := mb.eject(u.opts.Refused, now)
	mb.refusedOut = true
	u.ejects[reasonRefused]++
	m.transitionLocked(mb, reasonRefused+" (ejected for "+d.String()+")", now)
}

// reasonRefused is the ejection reason of a refused connection.
const reasonRefused = "connect_refused"

// count returns the ejected and the non-drained members of u.
func (u *upstream) count() (ejected, n int) {
	for _, mb := range u.members {
		if mb.weight == 0 {
			continue
		}
		n++
		if mb.ejected() {
			ejected++
		}
	}
	return ejected, n
}

// timedLocked ends the ejections that are over, marks upstreams whose ramps
// stepped as dirty, and finds the next timed event.
func (m *Manager) timedLocked(now time.Time) {
	for _, u := range m.mu.ups {
		for _, mb := range u.members {
			if mb.ejected() && !now.Before(mb.ejectedUntil) {
				mb.uneject(now)
				if mb.serving() {
					m.startRampLocked(mb, now)
				}
				m.transitionLocked(mb, "ejection_time_over", now)
				continue
			}
			if !mb.rampFrom.IsZero() {
				if !ramping(mb.rampFrom, u.opts.SlowStart, now) {
					mb.rampFrom = time.Time{}
					m.transitionLocked(mb, "slow_start_done", now)
				} else {
					m.mu.dirty[u.name] = true
				}
			}
		}
	}
	m.recomputeTimedLocked(now)
}

// recomputeTimedLocked finds the earliest ejection end or ramp step. O(n).
func (m *Manager) recomputeTimedLocked(now time.Time) {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, u := range m.mu.ups {
		for _, mb := range u.members {
			if mb.ejected() {
				earlier(mb.ejectedUntil)
			}
			if !mb.rampFrom.IsZero() {
				_, step := rampWeight(mb.weight, mb.rampFrom, u.opts.SlowStart, now)
				if step.IsZero() {
					step = mb.rampFrom.Add(u.opts.SlowStart)
				}
				earlier(step)
			}
		}
	}
	m.mu.nextTimed = next
}

// startRampLocked starts mb's slow start, when its upstream has one.
func (m *Manager) startRampLocked(mb *member, now time.Time) {
	if mb.up.opts.SlowStart > 0 {
		mb.rampFrom = now
	}
}

// transitionLocked records a change of mb's health: its state (logged once
// when it changes), the upstream marked for a rebuild, timed events
// recomputed.
func (m *Manager) transitionLocked(mb *member, reason string, now time.Time) {
	mb.reason = reason
	if s := mb.currentState(mb.up.opts.SlowStart, now); s != mb.state {
		m.o.Logger.Info("endpoint health changed", "upstream", mb.up.name, "endpoint", mb.addr,
			"from", string(mb.state), "to", string(s), "reason", reason, "ejections", mb.ejections)
		mb.state, mb.since = s, now
	}
	m.mu.dirty[mb.up.name] = true
	m.recomputeTimedLocked(now)
}

// takeDirtyLocked returns the dirty upstreams that may be rebuilt now, and
// when the next of the others may be.
func (m *Manager) takeDirtyLocked(now time.Time) (ready []string, next time.Time) {
	for name := range m.mu.dirty {
		at := m.mu.lastRebuild[name].Add(minRebuildGap)
		if now.Before(at) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		delete(m.mu.dirty, name)
		m.mu.lastRebuild[name] = now
		if m.mu.ups[name] != nil {
			ready = append(ready, name)
		}
	}
	return ready, next
}
