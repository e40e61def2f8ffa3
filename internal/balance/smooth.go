package balance

// Smooth weighted round robin, precomputed.
//
// ORDER. The picker reproduces the interleaving of NGINX's smooth weighted
// round robin (ngx_http_upstream_get_peer in
// src/http/ngx_http_upstream_round_robin.c, introduced by commit
// 52327e0627f49dbda1e8db695e63a4b0af4448b1, 2012). With weights w_i and
// W = Σ w_i, each step does
//
//	current_i += w_i            for every i
//	j = argmax_i current_i      (ties: the earliest in the slice)
//	current_j -= W              and j is the pick
//
// For {a:3, b:1} that is a a b a; for {a:5, b:1, c:1} it is a a b a c a a.
// After W steps each i has been picked exactly w_i times and every current_i
// is 0 again, so the order is a cycle of length W. Multiplying every weight
// by g multiplies every current_i by g and changes no comparison, so the
// cycle for g·w equals the cycle for w; weights are divided by their gcd
// first. A weight-0 endpoint is never picked (its current stays 0 while the
// maximum is positive), so drained endpoints are dropped up front.
//
// BUILD. NewSmoothWeighted turns the weights into one cycle, sched, of
// L uint32 slots (indexes into the non-drained endpoints). k is the number of
// non-drained endpoints.
//
//  1. Weights: a nil endpoint counts as drained; a weight above
//     endpoint.MaxWeight×WeightScale counts as that maximum; weight 0 is dropped.
//  2. gcd: Euclid on positive uint32. By Lamé's theorem it needs at most 46
//     remainder steps for values < 2^32 (the worst case is consecutive
//     Fibonacci numbers, F(46) and F(47) < 2^32 < F(48), in the order that
//     spends one step swapping them). The loop is still bounded by
//     gcdMaxSteps and falls back to gcd 1 (no reduction, still correct) if
//     the bound is ever hit: an unbounded gcd loop over a weight nobody
//     expected is the outage levee was written after.
//  3. Cap: L ≤ C = max(2^16, 8k) (maxSchedule), so memory is 4·C bytes and
//     building stays bounded whatever the weights. If the reduced sum W
//     exceeds C, T = C − k slots are apportioned by largest remainder:
//     a_i = ⌊w_i·T/W⌋, plus one for the T − Σ⌊·⌋ endpoints with the largest
//     remainders (ties: earliest), then every a_i that came out 0 is raised
//     to 1, so no live endpoint is starved. With b ≤ k endpoints raised,
//     L = T + b ≤ C and the weights are reduced by their gcd again.
//     Precision trade-off: endpoint i's share of picks becomes a_i/L instead
//     of w_i/W, with |a_i/L − w_i/W| < (1 + b·w_i/W) / L. When nobody is
//     raised (b = 0) that is under one slot, 1/L ≤ 8/(7C). Raising b tiny
//     endpoints hands them b slots, and the other endpoints give those slots
//     up in proportion to their weights: at most b/L ≤ k/(C−k) ≤ 1/7 of each
//     one's share, relatively (1.5% when C = 2^16 and 1,000 endpoints are
//     raised). Weights that already sum to at most C are used exactly.
//  4. Schedule, in one of two regimes:
//     - Exact (L·k ≤ exactBudget = 2^22): simulate the NGINX loop above for L
//     steps; O(L·k) ≤ 4,194,304 inner steps. The picks are NGINX's sequence
//     for weights a_i, step for step.
//     - Pfair EDF (larger pools): the same per-cycle counts, built in
//     O(L log k). The j-th pick (j = 1..a_i) of endpoint i becomes a unit job
//     released at slot ⌊(j−1)·L/a_i⌋ with deadline ⌈j·L/a_i⌉; at every slot
//     the released job with the earliest deadline (ties: earliest endpoint)
//     takes it. These are the Pfair windows of Baruah, Cohen, Plaxton and
//     Varvel ("Proportionate progress", 1996); the rates sum to exactly 1,
//     so a schedule meeting every window exists, and EDF over unit jobs with
//     integer release times on one machine finds one whenever one exists.
//     Hence, for every endpoint i and every prefix of t picks counted from
//     the start of a cycle, the count c_i(t) satisfies
//     |c_i(t) − t·a_i/L| < 1 (strictly; and 0 at each cycle end, so the
//     bound carries over any number of cycles). NGINX's own order does not
//     promise this: for weights 1,1,1,1,3,3,3,3 it lets an endpoint fall
//     more than one pick behind. Release times are what Envoy's EDF
//     scheduler (source/common/upstream/edf_scheduler.h: deadline =
//     current + 1/weight) does without: ordered by deadline alone, one
//     endpoint of weight L/2 among L/2 endpoints of weight 1 takes the first
//     L/2 slots (its deadlines 2, 4, ... all precede the light ones' L);
//     here it takes every other slot. Jobs wait for release in per-slot
//     buckets (O(1) each); released ones sit in a binary heap of at most k
//     entries.
//
// WORK. Per pick: one atomic add, one modulo and two indexed loads: O(1),
// no loop, no lock, no allocation. Per build: O(n + k log k) for weights and
// apportionment, plus ≤ 2^22 steps (exact) or O(L log k) with
// L ≤ max(2^16, 8k) (Pfair EDF); memory O(n + L). Indexes are 32-bit, so a
// set holds fewer than 2^31 live endpoints (16 GiB of pointers). Measured
// with BenchmarkSmoothWeightedBuild on a 2-vCPU AMD EPYC VM: about 13 ms for
// 10,000 endpoints with weights 1..10000, 7-11 ms for the slowest exact
// build (L·k = 2^22).
//
// LOCKING. None. The snapshot is never written after NewSmoothWeighted
// returns; the only mutable word is the atomic cursor. Each Pick takes a
// distinct cursor value, so any N picks made after construction, by any
// number of goroutines, take slots 0..N−1 of the repeated cycle: over whole
// cycles the counts are exact however the goroutines interleave. (The
// uint64 cursor wraps after 2^64 picks, which at 10^9 picks per second is
// 584 years; the wrap would only shift the phase.)

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"

	"github.com/levee-gw/levee/internal/endpoint"
)

const (
	// minSchedule is the smallest cap on the cycle length L.
	minSchedule = 1 << 16
	// slotsPerEndpoint keeps the cap at least 8 slots per live endpoint, so
	// raising tiny weights to 1 costs at most 1/8 of the cap.
	slotsPerEndpoint = 8
	// exactBudget is the most L·k inner steps the exact NGINX simulation
	// may take; beyond it the schedule is built by Pfair EDF.
	exactBudget = 1 << 22
	// gcdMaxSteps bounds Euclid's loop. Values < 2^32 need at most 46
	// steps (see the header), so the bound is never hit; it is enforced
	// anyway.
	gcdMaxSteps = 48
)

// maxSchedule is the cap on the cycle length for k live endpoints.
func maxSchedule(k int) int { return max(minSchedule, slotsPerEndpoint*k) }

// SmoothWeighted is a smooth weighted round-robin Picker over a fixed set of
// endpoints: over every cycle each live endpoint is picked in proportion to
// its weight, in NGINX's smooth order (see the algorithm header in this
// file). It is an immutable snapshot, safe for concurrent use; Pick is O(1),
// never blocks, takes no lock and does not allocate. A weight change means a
// new SmoothWeighted. The zero value has no endpoints: Pick returns
// ErrNoEndpoint. It must not be copied after first use.
type SmoothWeighted struct {
	// cursor counts picks; pick number s takes slot s mod len(sched).
	cursor atomic.Uint64
	// eps are the live (non-nil, weight > 0) endpoints in input order.
	eps []*endpoint.Endpoint
	// weights[i] is how many slots of one cycle eps[i] holds: its weight
	// after clamping, gcd reduction and (for large sums) apportionment.
	weights []uint32
	// sched is one cycle; each slot indexes eps. len(sched) = Σ weights.
	sched []uint32
	// exact reports that sched is NGINX's order step for step (else it is
	// the Pfair EDF order with the same counts).
	exact bool
}

var _ Picker = (*SmoothWeighted)(nil)

// NewSmoothWeighted builds a smooth weighted round-robin picker over eps.
// It copies what it needs and neither keeps nor modifies eps. Each
// endpoint's Weight is read once: 0 means drained (never picked); a weight
// above endpoint.MaxWeight×WeightScale is treated as that maximum; a nil entry is treated
// as drained, so that one bad record cannot panic the request path. Callers
// should pass validated, non-nil endpoints and key weights by endpoint, not
// by position. If eps is empty or all drained, Pick returns ErrNoEndpoint.
//
// Building takes O(n + k log k) time plus at most 2^22 simulation steps or
// O(L log k) heap steps, and O(n + L) memory, where k is the number of live
// endpoints and L ≤ max(2^16, 8k) the cycle length; it terminates for any
// input.
func NewSmoothWeighted(eps []*endpoint.Endpoint) *SmoothWeighted {
	p := &SmoothWeighted{}
	var w []uint32
	p.eps, w = liveSet(eps, maxWeight)
	if len(w) == 0 {
		return p
	}
	p.weights = apportion(w, maxSchedule(len(w)))
	p.sched, p.exact = schedule(p.weights)
	return p
}

// Pick returns the endpoint in the next slot of the cycle, or ErrNoEndpoint
// if there is no live endpoint. It is O(1), lock-free and allocation-free.
func (p *SmoothWeighted) Pick() (*endpoint.Endpoint, error) {
	n := uint64(len(p.sched))
	if n == 0 {
		return nil, ErrNoEndpoint
	}
	s := p.cursor.Add(1) - 1
	return p.eps[p.sched[s%n]], nil
}

// gcd returns the greatest common divisor of a and b by Euclid's algorithm,
// taking at most maxSteps remainder steps. ok is false, and g is 1, if the
// bound was reached first. gcd(a, 0) = a.
func gcd(a, b uint32, maxSteps int) (g uint32, ok bool) {
	for steps := 0; b != 0; steps++ {
		if steps >= maxSteps {
			return 1, false
		}
		a, b = b, a%b
	}
	return a, true
}

// reduce divides the positive weights w by their gcd in place and returns
// their sum. If the bounded gcd gives up, the weights are left unreduced,
// which changes the cycle's length but not its order.
func reduce(w []uint32) uint64 {
	g := w[0]
	for _, x := range w[1:] {
		if g == 1 {
			break
		}
		var ok bool
		if g, ok = gcd(g, x, gcdMaxSteps); !ok {
			g = 1
		}
	}
	var sum uint64
	for i := range w {
		w[i] /= g
		sum += uint64(w[i])
	}
	return sum
}

// apportion reduces the positive weights w in place by their gcd and, if
// they then sum to more than limit, scales them down by largest remainder
// so that they sum to at most limit, each staying ≥ 1 (see step 3 of the
// header). It requires 8·len(w) ≤ limit and returns w.
func apportion(w []uint32, limit int) []uint32 {
	total := reduce(w)
	if total <= uint64(limit) {
		return w
	}
	k := len(w)
	slots := uint64(limit - k)
	rem := make([]uint64, k)
	var given uint64
	for i, x := range w {
		num := uint64(x) * slots
		w[i] = uint32(num / total)
		rem[i] = num % total
		given += uint64(w[i])
	}
	if extra := slots - given; extra > 0 { // extra < k
		order := make([]int32, k)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(a, b int32) int {
			if c := cmp.Compare(rem[b], rem[a]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		for _, i := range order[:extra] {
			w[i]++
		}
	}
	for i := range w {
		w[i] = max(w[i], 1)
	}
	reduce(w)
	return w
}

// schedule builds one cycle for the positive weights w: NGINX's exact order
// when the simulation fits exactBudget, else the Pfair EDF order.
func schedule(w []uint32) (sched []uint32, exact bool) {
	var total uint64
	for _, x := range w {
		total += uint64(x)
	}
	if total*uint64(len(w)) <= exactBudget {
		return nginxSchedule(w, int(total)), true
	}
	return pfairSchedule(w, int(total)), false
}

// nginxSchedule runs NGINX's smooth weighted round robin over the positive
// weights w for total = Σ w steps (one cycle): total·len(w) inner steps.
func nginxSchedule(w []uint32, total int) []uint32 {
	sched := make([]uint32, total)
	cur := make([]int64, len(w))
	for s := range sched {
		best, bestCur := 0, int64(math.MinInt64)
		for i, x := range w {
			c := cur[i] + int64(x)
			cur[i] = c
			if c > bestCur { // strict: ties keep the earliest
				best, bestCur = i, c
			}
		}
		cur[best] -= int64(total)
		sched[s] = uint32(best)
	}
	return sched
}

// pfairSchedule builds one cycle of length total = Σ w with exactly w[i]
// slots for endpoint i, by earliest deadline first over the Pfair windows
// (step 4 of the header). Work: total heap pops or root replacements on a
// heap of at most len(w) entries, and one pass over total buckets.
func pfairSchedule(w []uint32, total int) []uint32 {
	k := len(w)
	L := uint64(total)
	// For endpoint i with its next job j: j·L = q[i]·w[i] + r[i], so the
	// job's deadline is q[i] + (r[i] > 0); left[i] jobs remain.
	q := make([]uint64, k)
	r := make([]uint64, k)
	dl := make([]uint64, k)
	left := make([]uint32, k)
	// Jobs not yet released wait in buckets by release slot: head[t] is
	// the first endpoint released at slot t, next links the rest; -1 ends.
	head := make([]int32, total)
	for t := range head {
		head[t] = -1
	}
	next := make([]int32, k)
	h := edfHeap{dl: dl, h: make([]int32, k)}
	for i, x := range w {
		q[i], r[i] = L/uint64(x), L%uint64(x)
		dl[i] = q[i]
		if r[i] > 0 {
			dl[i]++
		}
		left[i] = x
		h.h[i] = int32(i) // every first job is released at slot 0
	}
	h.init()

	sched := make([]uint32, total)
	released := 0 // buckets 0..released have been moved into the heap
	for t := range sched {
		for released < t {
			released++
			h.pushBucket(head, next, released)
		}
		// The Pfair theorem says a released job is always waiting here.
		// Should it not be, take the next bucket early: every slot is still
		// filled and every count still exact; only smoothness would suffer.
		for len(h.h) == 0 && released < total-1 {
			released++
			h.pushBucket(head, next, released)
		}
		i := h.h[0]
		sched[t] = uint32(i)
		left[i]--
		if left[i] == 0 {
			h.pop()
			continue
		}
		// Advance endpoint i to its next job: its release slot is the old
		// ⌊j·L/w⌋ and j·L grows by L.
		x := uint64(w[i])
		release := q[i]
		r[i] += L % x
		q[i] += L / x
		if r[i] >= x {
			r[i] -= x
			q[i]++
		}
		dl[i] = q[i]
		if r[i] > 0 {
			dl[i]++
		}
		if release <= uint64(released) {
			h.down(0) // still released: it stays in the heap with a later deadline
			continue
		}
		h.pop()
		next[i] = head[release]
		head[release] = i
	}
	return sched
}

// edfHeap is a binary min-heap of endpoint indexes ordered by deadline, ties
// by index. Hand-written rather than container/heap to keep the build free
// of interface calls.
type edfHeap struct {
	dl []uint64
	h  []int32
}

func (e *edfHeap) less(a, b int32) bool {
	return e.dl[a] < e.dl[b] || (e.dl[a] == e.dl[b] && a < b)
}

func (e *edfHeap) init() {
	for i := len(e.h)/2 - 1; i >= 0; i-- {
		e.down(i)
	}
}

// down restores the heap below position i: at most log2(len) swaps.
func (e *edfHeap) down(i int) {
	h := e.h
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && e.less(h[c+1], h[c]) {
			c++
		}
		if !e.less(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// up restores the heap above position i: at most log2(len) swaps.
func (e *edfHeap) up(i int) {
	h := e.h
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(h[i], h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// pop removes the minimum.
func (e *edfHeap) pop() {
	n := len(e.h) - 1
	e.h[0] = e.h[n]
	e.h = e.h[:n]
	e.down(0)
}

// pushBucket moves every endpoint waiting in bucket t into the heap. Each
// endpoint is in at most one bucket, so the list has at most k entries.
func (e *edfHeap) pushBucket(head, next []int32, t int) {
	for i := head[t]; i >= 0; i = next[i] {
		e.h = append(e.h, i)
		e.up(len(e.h) - 1)
	}
	head[t] = -1
}
