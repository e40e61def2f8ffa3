package health

// One endpoint's health state machine, and the pure rules it follows.
//
// ACTIVE CHECKS. Each check passes or fails. passes and fails count the
// current run (one resets the other). A healthy endpoint becomes unhealthy
// after UnhealthyAfter failures in a row; an unhealthy one becomes healthy
// after HealthyAfter passes in a row. Endpoints start healthy (as NGINX's
// health_check does without "mandatory"): a restart of levee does not take
// a whole pool out of service until checks have run.
//
// OUTLIER EJECTION. When a failure run reaches a threshold the endpoint is
// ejected for ejectionTime = min(max, base × n), where n counts this
// ejection and the previous ones that have not decayed: n falls by one
// for every base that the endpoint spends back in service (Envoy decays
// its multiplier on every detection interval in the same way; levee uses
// base as that interval). An ejection happens only while
// mayEject(ejected, n, percent) holds. With active checks, an ejected
// endpoint that passes HealthyAfter checks in a row (counted from its
// ejection) returns at once.
//
// SLOW START. An endpoint that starts serving again (ejection over,
// unhealthy to healthy) or that joins an upstream after its first set
// ramps from rampFloor of its weight to all of it over the window, in at
// most rampSteps steps (at least minRampStep apart), so the picker is
// rebuilt a bounded number of times per ramp.
//
// Every function here takes the time as a parameter.

import (
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

const (
	// rampFloor is the smallest share of its weight a slow-starting
	// endpoint gets.
	rampFloor = 0.1
	// rampSteps is the most picker rebuilds one ramp causes.
	rampSteps = 10
	// minRampStep is the shortest time between two ramp steps.
	minRampStep = 100 * time.Millisecond
)

// member is one endpoint of one upstream, as the Manager tracks it.
// Guarded by Manager.mu.
type member struct {
	up     *upstream
	addr   string
	weight uint32 // configured, hundredths
	stats  *endpoint.Stats

	// Active checks.
	checkDown     bool
	passes, fails int
	// Outlier ejection.
	ejections    int       // counts toward the next ejection's length
	ejectedUntil time.Time // zero: not ejected
	returnedAt   time.Time // when the last ejection ended (for decay)
	refusedOut   bool      // the current ejection is for a refused connection
	// Slow start; zero: not ramping.
	rampFrom time.Time

	state  State
	since  time.Time
	reason string

	// Scheduling of active checks.
	nextCheck time.Time
	heapIdx   int // index in Manager.due, -1 when not queued
	checking  bool
	removed   bool
}

// ejected reports whether the endpoint is ejected.
func (m *member) ejected() bool { return !m.ejectedUntil.IsZero() }

// serving reports whether the endpoint takes traffic outside panic mode.
func (m *member) serving() bool { return m.weight > 0 && !m.checkDown && !m.ejected() }

// currentState is what the endpoint's state is at now.
func (m *member) currentState(slow time.Duration, now time.Time) State {
	switch {
	case m.weight == 0:
		return Drained
	case m.ejected():
		return Ejected
	case m.checkDown:
		return Unhealthy
	case ramping(m.rampFrom, slow, now):
		return SlowStart
	}
	return Healthy
}

// recordCheck counts one check result. It reports whether the endpoint's
// check health flipped (up is true when it came back), and unejects an
// ejected endpoint that has passed healthyAfter checks since its ejection
// (returned is then true).
func (m *member) recordCheck(ok bool, c *CheckOptions) (flipped, up, returned bool) {
	if ok {
		m.passes++
		m.fails = 0
	} else {
		m.fails++
		m.passes = 0
	}
	switch {
	case m.checkDown && m.passes >= c.HealthyAfter:
		m.checkDown = false
		flipped, up = true, true
	case !m.checkDown && m.fails >= c.UnhealthyAfter:
		m.checkDown = true
		flipped = true
	}
	if m.ejected() && ok && m.passes >= c.HealthyAfter {
		returned = true
	}
	return flipped, up, returned
}

// ejectionTime is min(max, base × n) for the n-th ejection (n >= 1).
func ejectionTime(base, limit time.Duration, n int) time.Duration {
	if n < 1 {
		n = 1
	}
	if base <= 0 || int64(n) > int64(limit/base) {
		return limit
	}
	return min(limit, base*time.Duration(n))
}

// mayEject reports whether one more of n non-drained endpoints may be
// ejected when ejected already are: only if ejected+1 ≤ ⌊percent × n /
// 100⌋. With 10 endpoints and 50 % that is 5; a single endpoint at
// anything below 100 % is never ejected.
func mayEject(ejected, n, percent int) bool {
	return (ejected+1)*100 <= percent*n
}

// decayedEjections is the number of previous ejections that still count at
// now: n less one for every base spent in service since returned.
func decayedEjections(n int, returned time.Time, base time.Duration, now time.Time) int {
	if n <= 0 || returned.IsZero() || base <= 0 || !now.After(returned) {
		return max(n, 0)
	}
	k := now.Sub(returned) / base
	if k >= time.Duration(n) {
		return 0
	}
	return n - int(k)
}

// eject takes the endpoint out until now + its ejection time.
func (m *member) eject(o *OutlierOptions, now time.Time) time.Duration {
	m.ejections = decayedEjections(m.ejections, m.returnedAt, o.BaseEjectionTime, now) + 1
	d := ejectionTime(o.BaseEjectionTime, o.MaxEjectionTime, m.ejections)
	m.ejectedUntil = now.Add(d)
	m.passes = 0
	m.stats.ResetRuns()
	return d
}

// uneject returns the endpoint to service (through slow start, which
// startRamp decides).
func (m *member) uneject(now time.Time) {
	m.ejectedUntil = time.Time{}
	m.returnedAt = now
	m.refusedOut = false
}

// rampStepsFor is the number of steps of a ramp over window.
func rampStepsFor(window time.Duration) int64 {
	return max(1, min(rampSteps, int64(window/minRampStep)))
}

// ramping reports whether an endpoint that began ramping at from is still
// ramping at now.
func ramping(from time.Time, window time.Duration, now time.Time) bool {
	return !from.IsZero() && window > 0 && now.Sub(from) < window
}

// rampWeight is weight w scaled for a ramp over window begun at from, at
// now: w × max(rampFloor, k/steps) at step k of steps (k = ⌊elapsed ×
// steps / window⌋), never below 1; w itself once the window has passed.
// next is when the weight changes again (zero when it no longer will).
func rampWeight(w uint32, from time.Time, window time.Duration, now time.Time) (eff uint32, next time.Time) {
	if !ramping(from, window, now) || w == 0 {
		return w, time.Time{}
	}
	steps := rampStepsFor(window)
	elapsed := max(0, now.Sub(from))
	k := int64(elapsed) * steps / int64(window)
	f := max(rampFloor, float64(k)/float64(steps))
	eff = max(1, uint32(float64(w)*f))
	next = from.Add(time.Duration((k + 1) * int64(window) / steps))
	return eff, next
}
