package balance

// Weighted least request: power of two choices, with an optional
// peak-EWMA latency estimate.
//
// SOURCE. Mitzenmacher, "The Power of Two Choices in Randomized Load
// Balancing" (IEEE TPDS, 2001): sending each request to the less loaded of
// two random servers keeps the maximum load exponentially closer to the mean
// than one random choice. Envoy's LEAST_REQUEST uses it for equal weights;
// the EWMA variant is Finagle's and Linkerd's peak EWMA (Finagle
// PeakEwma.scala; tower's balance::p2c with load::PeakEwma).
//
// DRAW. Live endpoints are the non-nil ones with weight > 0 (weights above
// maxWeight = 1,000,000 count as maxWeight). A Vose alias table built once
// (k columns; column c keeps c with probability keep_c/W, else gives its
// alias) draws endpoint i with probability exactly w_i/W, W = Σ w, from one
// 64-bit random number: the high word of r·k is the column and the low word
// the coin (Lemire's multiply-shift). Candidate a is one draw; candidate b
// is another draw, redrawn up to 3 times while it equals a, and if it still
// does, a uniform choice among the other k−1 endpoints. So a pick uses 2 to
// 6 random numbers, and with k ≥ 2 the candidates always differ.
//
// SCORE. Without EWMA, the load per unit of weight,
//
//	score_i = inflight_i / w_i,  compared as inflight_a·w_b vs inflight_b·w_a
//
// (integers, exact; inflight is read from ep.Stats.Inflight and clamped to
// 0..2^40). The lower score wins; a tie goes to a, the first draw. Because a
// is drawn in proportion to weight and every score is 0 when nothing is in
// flight, idle endpoints share picks exactly by weight; under load the
// comparison moves requests toward the endpoint with the least load per
// unit of weight. (Scoring (inflight+1)/w instead would double-count the
// weight when idle: two endpoints of weights 1 and 2 would send every idle
// request to the heavier one.)
//
// With EWMA, Finagle's cost,
//
//	score_i = est_i(now) · (inflight_i + 1) / w_i   (float64)
//
// where est_i is the peak-EWMA latency estimate: Observe(rtt, t) sets
// est = rtt if rtt ≥ est (a slow response counts at once), else
// est = est·d + rtt·(1−d) with d = e^(−Δ/τ), Δ = t − t_last; and reading at
// now decays it toward zero, est·e^(−(now − t_last)/τ), as tower's
// RttEstimate does, so an endpoint that has not answered for a while (for
// example after a latency spike steered traffic away) is tried again. The +1
// keeps latency in the score when nothing is in flight. A new address starts
// at DefaultRTT (30 ms, linkerd2-proxy's default_rtt); with Prev, an address
// already known keeps its estimate (the Latency is shared, so observations
// made through the old picker still count).
//
// WORK. Pick: at most 6 random numbers, 5 alias lookups, 2 atomic loads
// (4 with EWMA, plus two math.Exp and one clock read): O(1), no loop other
// than the 3 redraws. Build: O(n) and, with Prev, a map of its addresses.
// Observe: one map lookup, one atomic swap, and a compare-and-swap retried
// at most 4 times (then the sample is stored over the racing one).
//
// LOCKING. None. The alias table, endpoints and options are never written
// after NewLeastRequest returns. Inflight counters and latency estimates are
// atomics written by the request path; a Pick reads each once, so it
// compares values from slightly different instants, which is inherent to
// power of two choices and harmless. A Latency's time stamp and estimate are
// two words written one after the other; a reader between the two sees a
// fresh estimate with the previous time stamp (or the reverse) and decays it
// by at most one inter-response interval too much or too little.

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

const (
	// DefaultTau is the EWMA decay time constant when LeastRequestOptions.Tau
	// is 0.
	DefaultTau = 10 * time.Second
	// DefaultRTT is the latency estimate an endpoint starts with when
	// LeastRequestOptions.DefaultRTT is 0.
	DefaultRTT = 30 * time.Millisecond
	// maxInflight caps the inflight count the score uses, so that
	// inflight·weight stays below 2^63 (2^40 · 2^20 = 2^60).
	maxInflight = 1 << 40
	// redraws is how many times the second candidate is redrawn by weight
	// while it equals the first.
	redraws = 3
	// casRetries bounds Observe's compare-and-swap loop.
	casRetries = 4
)

// LeastRequestOptions configures NewLeastRequest. The zero value picks by
// in-flight requests per unit of weight, without latency.
type LeastRequestOptions struct {
	// EWMA includes each endpoint's decayed latency estimate in the score
	// (see the header). Observe must then be called with each response's
	// round-trip time, or every estimate decays to zero and the score falls
	// back to in-flight requests per unit of weight.
	EWMA bool
	// Tau is the EWMA decay time constant: an observation's weight falls to
	// 1/e after Tau. 0 or negative means DefaultTau (10 s).
	Tau time.Duration
	// DefaultRTT is the estimate a new address starts with. 0 or negative
	// means DefaultRTT (30 ms). An estimate of 0 would make a new endpoint win
	// every comparison until its first response.
	DefaultRTT time.Duration
	// Prev is the picker this one replaces, if any: the latency estimate of
	// every address it knows is carried over (shared). nil: all start fresh.
	Prev *LeastRequest
	// Now is the clock Pick reads when EWMA is on, and the time new
	// estimates are stamped with. nil means time.Now. Tests inject a fake.
	Now func() time.Time
	// Rand returns uniform 64-bit random numbers and must be safe for
	// concurrent use. nil means math/rand/v2's Uint64 (goroutine-safe,
	// lock-free, allocation-free). Tests inject a sequence.
	Rand func() uint64
}

// Latency is one endpoint's peak-EWMA latency estimate, shared by every
// LeastRequest snapshot that contains the endpoint's address. Safe for
// concurrent use; the zero value is an estimate of 0 stamped at the Unix
// epoch. Times are wall-clock nanoseconds (time.Time.UnixNano): a clock step
// backwards counts as no time passing, a step forwards as that much decay.
type Latency struct {
	last atomic.Int64  // UnixNano of the last update
	ewma atomic.Uint64 // math.Float64bits of the estimate in ns
}

// Observe folds one round-trip time, measured at now, into the estimate
// with time constant tau (see the header). It takes a bounded number of
// steps and does not allocate.
func (l *Latency) Observe(rtt time.Duration, now time.Time, tau time.Duration) {
	t := now.UnixNano()
	dt := max(t-l.last.Swap(t), 0) // each observer gets its own interval
	d := decay(dt, tau)
	x := float64(max(rtt, 0))
	for range casRetries {
		old := l.ewma.Load()
		est := math.Float64frombits(old)
		next := x
		if x < est {
			next = est*d + x*(1-d)
		}
		if l.ewma.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
	l.ewma.Store(math.Float64bits(x)) // racing observers: the last one wins
}

// Estimate returns the estimate decayed to now with time constant tau.
func (l *Latency) Estimate(now time.Time, tau time.Duration) time.Duration {
	return time.Duration(l.estimate(now.UnixNano(), tau))
}

func (l *Latency) estimate(now int64, tau time.Duration) float64 {
	est := math.Float64frombits(l.ewma.Load())
	return est * decay(now-l.last.Load(), tau)
}

// decay returns e^(−dt/tau), 1 when dt ≤ 0 and 0 when tau ≤ 0.
func decay(dt int64, tau time.Duration) float64 {
	if dt <= 0 {
		return 1
	}
	if tau <= 0 {
		return 0
	}
	return math.Exp(-float64(dt) / float64(tau))
}

// LeastRequest is a weighted power-of-two-choices Picker over a fixed set of
// endpoints, optionally scoring latency (see the algorithm header in this
// file). It is an immutable snapshot, safe for concurrent use; Pick is
// O(1), never blocks, takes no lock and does not allocate. The zero value
// has no endpoints.
type LeastRequest struct {
	// eps are the live endpoints in input order; weights, stats and lat
	// are parallel to it.
	eps     []*endpoint.Endpoint
	weights []uint32
	stats   []*endpoint.Stats // never nil: a private zero Stats for an endpoint without one
	lat     []*Latency
	// index maps each live endpoint to its position, for Observe.
	index map[*endpoint.Endpoint]int32
	// Alias table: column c keeps c when u < keep[c] (u uniform in
	// [0, total)), else gives alias[c].
	keep  []uint64
	alias []uint32
	total uint64

	ewma bool
	tau  time.Duration
	now  func() time.Time
	rnd  func() uint64
}

var _ Picker = (*LeastRequest)(nil)

// NewLeastRequest builds a least-request picker over eps. It copies what it
// needs and neither keeps nor modifies eps. Each endpoint's Weight is read
// once: 0 means drained (never picked), a weight above 1,000,000 counts as
// 1,000,000, and a nil entry counts as drained. If no endpoint is live,
// Pick returns ErrNoEndpoint. Building is O(n) time and memory.
func NewLeastRequest(eps []*endpoint.Endpoint, o LeastRequestOptions) *LeastRequest {
	p := &LeastRequest{ewma: o.EWMA, tau: o.Tau, now: o.Now, rnd: o.Rand}
	if p.tau <= 0 {
		p.tau = DefaultTau
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.rnd == nil {
		p.rnd = rand.Uint64
	}
	rtt := o.DefaultRTT
	if rtt <= 0 {
		rtt = DefaultRTT
	}
	p.eps, p.weights = liveSet(eps, maxWeight)
	k := len(p.eps)
	if k == 0 {
		return p
	}
	var prev map[string]*Latency
	if o.Prev != nil {
		prev = make(map[string]*Latency, len(o.Prev.eps))
		for i, e := range o.Prev.eps {
			prev[e.Address] = o.Prev.lat[i]
		}
	}
	stamp := p.now()
	p.stats = make([]*endpoint.Stats, k)
	p.lat = make([]*Latency, k)
	p.index = make(map[*endpoint.Endpoint]int32, k)
	var zero *endpoint.Stats
	for i, e := range p.eps {
		p.index[e] = int32(i)
		if p.stats[i] = e.Stats; e.Stats == nil {
			if zero == nil {
				zero = &endpoint.Stats{}
			}
			p.stats[i] = zero
		}
		if l := prev[e.Address]; l != nil {
			p.lat[i] = l
			continue
		}
		l := &Latency{}
		l.last.Store(stamp.UnixNano())
		l.ewma.Store(math.Float64bits(float64(rtt)))
		p.lat[i] = l
	}
	p.keep, p.alias, p.total = aliasTable(p.weights)
	return p
}

// aliasTable builds Vose's alias table for the positive weights w in exact
// integer arithmetic: each column holds total = Σ w of mass, endpoint i
// brings w_i·k. Drawing a column uniformly and keeping it when a uniform
// u ∈ [0, total) is below keep[c] (else taking alias[c]) yields i with
// probability exactly w_i/total. At most k pairing steps; w_i·k < 2^52.
func aliasTable(w []uint32) (keep []uint64, alias []uint32, total uint64) {
	k := len(w)
	for _, x := range w {
		total += uint64(x)
	}
	keep = make([]uint64, k)
	alias = make([]uint32, k)
	mass := make([]uint64, k)
	var small, large []uint32
	for i, x := range w {
		mass[i] = uint64(x) * uint64(k)
		alias[i] = uint32(i)
		if mass[i] < total {
			small = append(small, uint32(i))
		} else {
			large = append(large, uint32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 { // each step finishes one column
		s := small[len(small)-1]
		small = small[:len(small)-1]
		l := large[len(large)-1]
		keep[s], alias[s] = mass[s], l
		mass[l] -= total - mass[s]
		if mass[l] < total {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	// Exact arithmetic leaves every remaining column holding exactly total.
	for _, i := range large {
		keep[i] = total
	}
	for _, i := range small {
		keep[i] = total
	}
	return keep, alias, total
}

// draw returns endpoint i with probability w_i/total from one random number.
func (p *LeastRequest) draw() int {
	col, frac := uniform(p.rnd(), uint64(len(p.keep)))
	if u, _ := uniform(frac, p.total); u >= p.keep[col] {
		return int(p.alias[col])
	}
	return int(col)
}

// Pick returns the better of two endpoints drawn by weight, or
// ErrNoEndpoint if no endpoint is live. With EWMA on it reads the clock
// once (LeastRequestOptions.Now) and is PickAt(now). O(1), lock-free and
// allocation-free.
func (p *LeastRequest) Pick() (*endpoint.Endpoint, error) {
	if !p.ewma || len(p.eps) < 2 {
		return p.pick(0)
	}
	return p.pick(p.now().UnixNano())
}

// PickAt is Pick with the latency estimates decayed to now. Without EWMA,
// now is ignored.
func (p *LeastRequest) PickAt(now time.Time) (*endpoint.Endpoint, error) {
	return p.pick(now.UnixNano())
}

func (p *LeastRequest) pick(now int64) (*endpoint.Endpoint, error) {
	k := len(p.eps)
	switch k {
	case 0:
		return nil, ErrNoEndpoint
	case 1:
		return p.eps[0], nil
	}
	a, b := p.candidates()
	if p.better(b, a, now) {
		return p.eps[b], nil
	}
	return p.eps[a], nil
}

// candidates draws two distinct endpoints (k ≥ 2): a by weight, b by weight
// redrawn at most redraws times, then uniform among the others.
func (p *LeastRequest) candidates() (a, b int) {
	a, b = p.draw(), p.draw()
	for i := 0; b == a && i < redraws; i++ {
		b = p.draw()
	}
	if b == a {
		k := uint64(len(p.eps))
		off, _ := uniform(p.rnd(), k-1)
		b = int((uint64(a) + 1 + off) % k)
	}
	return a, b
}

// better reports whether endpoint b scores strictly lower than endpoint a.
func (p *LeastRequest) better(b, a int, now int64) bool {
	ia := min(max(p.stats[a].Inflight.Load(), 0), maxInflight)
	ib := min(max(p.stats[b].Inflight.Load(), 0), maxInflight)
	wa, wb := int64(p.weights[a]), int64(p.weights[b])
	if !p.ewma {
		return ib*wa < ia*wb
	}
	ca := p.lat[a].estimate(now, p.tau) * float64(ia+1) / float64(wa)
	cb := p.lat[b].estimate(now, p.tau) * float64(ib+1) / float64(wb)
	return cb < ca
}

// Observe folds a response's round-trip time, measured at now, into ep's
// latency estimate. It reports false, and does nothing, when ep is not a
// live endpoint of this snapshot. O(1), bounded, allocation-free.
func (p *LeastRequest) Observe(ep *endpoint.Endpoint, rtt time.Duration, now time.Time) bool {
	i, ok := p.index[ep]
	if !ok {
		return false
	}
	p.lat[i].Observe(rtt, now, p.tau)
	return true
}

// LeastRequestSet is one Observer over several least_request pickers (a
// zoned upstream has one per tier): a time goes to the first that has the
// endpoint. Bounded by the set's length; allocation-free.
type LeastRequestSet []*LeastRequest

// Observe implements Observer.
func (s LeastRequestSet) Observe(ep *endpoint.Endpoint, rtt time.Duration, now time.Time) bool {
	for _, p := range s {
		if p.Observe(ep, rtt, now) {
			return true
		}
	}
	return false
}

// Latency returns ep's shared latency estimate, or nil when ep is not a live
// endpoint of this snapshot.
func (p *LeastRequest) Latency(ep *endpoint.Endpoint) *Latency {
	if i, ok := p.index[ep]; ok {
		return p.lat[i]
	}
	return nil
}
