package ratelimit

// Check is one key held to one Policy: the unit of a decision over
// several keys at once (an app × route limit, then the app's own), as a
// store shared by several levee nodes takes them in one round trip.
type Check struct {
	Key    string
	Policy Policy
}

// Share returns the part of p one of n nodes enforces on its own when the
// nodes cannot share state: rate / n with burst / n (at least 1), and a
// quota of requests / n (at least 1). n below 2 returns p. A share whose
// interval would exceed the slowest rate allowed keeps the slowest rate.
func (p Policy) Share(n int) Policy {
	if n < 2 {
		return p
	}
	k := int64(n)
	if r := p.Rate; r.interval != 0 {
		iv := maxInterval
		if r.interval <= maxInterval/k {
			iv = r.interval * k
		}
		b := max(1, r.burst/k)
		p.Rate = Rate{interval: iv, limit: b * iv, burst: b}
	}
	if q := p.Quota; q.per != 0 {
		if q.requests != 0 {
			p.Quota.requests = max(1, q.requests/k)
		}
		if q.rows != 0 {
			p.Quota.rows = max(1, q.rows/k)
		}
		if q.bytes != 0 {
			p.Quota.bytes = max(1, q.bytes/k)
		}
	}
	return p
}

// Window is the emission interval T and L = burst·T of r, in nanoseconds:
// what a shared store needs to run the same GCRA.
func (r Rate) Window() (interval, limit int64) { return r.interval, r.limit }
