package balance

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"

	"github.com/levee-gw/levee/internal/endpoint"
)

// fataler is what the checks need from *testing.T, *testing.B and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// endpoints returns one fresh endpoint per weight, named a, b, c, ... (then
// e26, e27, ...), in order.
func endpoints(weights ...uint32) []*endpoint.Endpoint {
	eps := make([]*endpoint.Endpoint, len(weights))
	for i, w := range weights {
		eps[i] = endpoint.New(name(i), w)
	}
	return eps
}

func name(i int) string {
	if i < 26 {
		return string(rune('a' + i))
	}
	return fmt.Sprintf("e%d", i)
}

// refNGINX is the reference: NGINX's smooth weighted round robin run step by
// step, O(n) per pick, over the raw weights (0 allowed, no gcd, no cap). It
// returns the input index picked at each of steps steps, or -1 when every
// weight is 0.
func refNGINX(weights []uint32, steps int) []int {
	cur := make([]int64, len(weights))
	var total int64
	for _, w := range weights {
		total += int64(w)
	}
	out := make([]int, steps)
	for s := range out {
		if total == 0 {
			out[s] = -1
			continue
		}
		// Weight-0 entries take part, as the loop is written; they must
		// never win (their current stays 0 while the maximum is positive).
		best := -1
		for i, w := range weights {
			cur[i] += int64(w)
			if best < 0 || cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		out[s] = best
	}
	return out
}

// refGCD is the textbook gcd, for checking; test inputs are positive.
func refGCD(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// checkLag asserts the Pfair smoothness bound on one cycle: for every
// endpoint i and prefix t, |c_i(t) − t·w_i/L| < 1. Between two picks of i
// its lag t·w_i/L − c_i(t) only grows, so it is enough to look just before
// and just after each pick (and the cycle ends at lag 0 by the count check).
func checkLag(tb fataler, sched []uint32, weights []uint32) {
	tb.Helper()
	L := int64(len(sched))
	count := make([]int64, len(weights))
	for s, i := range sched {
		a, c := int64(weights[i]), count[i]
		if before := int64(s)*a - c*L; before >= L {
			tb.Fatalf("slot %d: endpoint %d (weight %d of %d) is behind by %d/%d ≥ 1 pick", s, i, a, L, before, L)
		}
		if after := int64(s+1)*a - (c+1)*L; after <= -L {
			tb.Fatalf("slot %d: endpoint %d (weight %d of %d) is ahead by %d/%d ≥ 1 pick", s, i, a, L, -after, L)
		}
		count[i]++
	}
	for i, c := range count {
		if c != int64(weights[i]) {
			tb.Fatalf("endpoint %d: %d slots in the cycle, want its weight %d", i, c, weights[i])
		}
	}
}

// checkPicker asserts every invariant of a picker built from eps, whatever
// its cursor: the live set, the cap, the apportioned weights (exact when the
// reduced sum fits the cap, within the documented share error otherwise),
// exact counts over one full cycle of Pick, no drained endpoint ever, the
// regime's order (NGINX step for step, or the Pfair lag bound). eps must
// not hold the same pointer twice.
func checkPicker(tb fataler, eps []*endpoint.Endpoint, p *SmoothWeighted) {
	tb.Helper()
	var live []*endpoint.Endpoint
	var clamped []uint64
	for _, e := range eps {
		if e != nil && e.Weight > 0 {
			live = append(live, e)
			clamped = append(clamped, uint64(min(e.Weight, endpoint.MaxWeight*endpoint.WeightScale)))
		}
	}
	k := len(live)
	if k == 0 {
		if len(p.sched) != 0 || len(p.eps) != 0 {
			tb.Fatalf("no live endpoint, but schedule has %d slots over %d endpoints", len(p.sched), len(p.eps))
		}
		for range 3 {
			if e, err := p.Pick(); e != nil || !errors.Is(err, ErrNoEndpoint) {
				tb.Fatalf("Pick() = %v, %v; want nil, ErrNoEndpoint", e, err)
			}
		}
		return
	}
	if len(p.eps) != k || len(p.weights) != k {
		tb.Fatalf("picker holds %d endpoints and %d weights, want %d live", len(p.eps), len(p.weights), k)
	}
	for i := range live {
		if p.eps[i] != live[i] {
			tb.Fatalf("live endpoint %d is %v, want %v", i, p.eps[i].Address, live[i].Address)
		}
	}
	L := len(p.sched)
	if limit := maxSchedule(k); L > limit || L < 1 {
		tb.Fatalf("schedule length %d, want 1..%d", L, limit)
	}
	var sum int
	for i, a := range p.weights {
		if a < 1 {
			tb.Fatalf("live endpoint %d has weight %d in the cycle, want ≥ 1", i, a)
		}
		sum += int(a)
	}
	if sum != L {
		tb.Fatalf("weights sum to %d, schedule has %d slots", sum, L)
	}

	// Apportionment: the exact reduced weights when they fit the cap,
	// otherwise within the documented share error.
	g := clamped[0]
	for _, c := range clamped[1:] {
		g = refGCD(g, c)
	}
	var W uint64
	for _, c := range clamped {
		W += c / g
	}
	limit := uint64(maxSchedule(k))
	if W <= limit {
		for i, c := range clamped {
			if uint64(p.weights[i]) != c/g {
				tb.Fatalf("endpoint %d: cycle weight %d, want %d/%d = %d (sum %d fits the cap %d)", i, p.weights[i], c, g, c/g, W, limit)
			}
		}
	} else {
		T := limit - uint64(k)
		var raisable int64 // endpoints whose proportional share is under one slot
		for _, c := range clamped {
			if c/g*T < W {
				raisable++
			}
		}
		for i, c := range clamped {
			w := int64(c / g)
			// |a/L − w/W| < (1 + b·w/W)/L  ⇔  |a·W − w·L| < W + b·w
			diff := int64(p.weights[i])*int64(W) - w*int64(L)
			if diff < 0 {
				diff = -diff
			}
			if bound := int64(W) + raisable*w; diff >= bound {
				tb.Fatalf("endpoint %d: share %d/%d vs %d/%d, error·L·W = %d ≥ %d", i, p.weights[i], L, w, W, diff, bound)
			}
		}
	}

	// One full cycle of Pick from wherever the cursor is: exact counts. Each
	// pick bumps the endpoint's own request counter, so a pick of anything
	// outside eps leaves the total short and a drained pick shows up on it.
	before := make([]uint64, len(eps))
	for i, e := range eps {
		if e != nil {
			before[i] = e.Stats.Requests.Load()
		}
	}
	for range L {
		e, err := p.Pick()
		if err != nil || e == nil {
			tb.Fatalf("Pick() = %v, %v with %d live endpoints", e, err, k)
		}
		e.Stats.Requests.Add(1)
	}
	var picked, j int
	for i, e := range eps {
		if e == nil {
			continue
		}
		got := int(e.Stats.Requests.Load() - before[i])
		picked += got
		want := 0
		if e.Weight > 0 {
			want = int(p.weights[j])
			j++
		}
		if got != want {
			tb.Fatalf("endpoint %d (%s, weight %d) picked %d times in one cycle of %d, want %d", i, e.Address, e.Weight, got, L, want)
		}
	}
	if picked != L {
		tb.Fatalf("%d of %d picks returned endpoints outside the set", L-picked, L)
	}

	if p.exact {
		if L*k > exactBudget {
			tb.Fatalf("exact regime with L·k = %d > budget %d", L*k, exactBudget)
		}
		if L*k <= 1<<20 { // the reference costs O(L·k); the property test covers the rest
			want := refNGINX(p.weights, L)
			for s := range want {
				if int(p.sched[s]) != want[s] {
					tb.Fatalf("slot %d: endpoint %d, NGINX picks %d (weights %v)", s, p.sched[s], want[s], p.weights)
				}
			}
		}
	} else {
		if L*k <= exactBudget {
			tb.Fatalf("Pfair regime with L·k = %d within budget %d", L*k, exactBudget)
		}
		checkLag(tb, p.sched, p.weights)
	}
}

// liveOf returns the live (non-nil, weight > 0) endpoints of eps, in order,
// and their weights clamped to the new pickers' cap, for checking.
func liveOf(eps []*endpoint.Endpoint) (live []*endpoint.Endpoint, w []uint64) {
	for _, e := range eps {
		if e != nil && e.Weight > 0 {
			live = append(live, e)
			w = append(w, uint64(min(e.Weight, maxWeight)))
		}
	}
	return live, w
}

// seqRand returns a Rand option that yields vals in order, then panics
// (a step table that draws more than it planned is wrong). Not for
// concurrent use.
func seqRand(tb fataler, vals ...uint64) func() uint64 {
	i := 0
	return func() uint64 {
		if i >= len(vals) {
			tb.Fatalf("step table drew random number %d, only %d planned", i+1, len(vals))
		}
		i++
		return vals[i-1]
	}
}

// randFor returns a random number that makes p.draw return endpoint i, by
// choosing a column that yields i and a coin at the bottom (keep) or the
// top (alias) of the range.
func randFor(tb fataler, p *LeastRequest, i int) uint64 {
	tb.Helper()
	k := uint64(len(p.keep))
	for c := range k {
		lo, _ := bits.Div64(c, 0, k) // ⌊c·2^64/k⌋: the first r of column c, or just below it
		hi := uint64(math.MaxUint64)
		if c+1 < k {
			hi, _ = bits.Div64(c+1, 0, k)
		}
		for _, r := range []uint64{lo + 1, lo + 2, hi - 2, hi - 1} {
			if col, _ := uniform(r, k); col == c && p.drawWith(r) == i {
				return r
			}
		}
	}
	tb.Fatalf("no random number draws endpoint %d", i)
	return 0
}

// drawWith is p.draw with the random number r.
func (p *LeastRequest) drawWith(r uint64) int {
	saved := p.rnd
	defer func() { p.rnd = saved }()
	p.rnd = func() uint64 { return r }
	return p.draw()
}

// checkAlias asserts that the alias table gives each live endpoint exactly
// its weight: Σ_c keep_c·[c = i] + (total − keep_c)·[alias_c = i] = w_i·k.
func checkAlias(tb fataler, p *LeastRequest, w []uint64) {
	tb.Helper()
	k := uint64(len(w))
	var total uint64
	for _, x := range w {
		total += x
	}
	if p.total != total || uint64(len(p.keep)) != k || uint64(len(p.alias)) != k {
		tb.Fatalf("alias table: total %d, %d columns, %d aliases; want %d, %d", p.total, len(p.keep), len(p.alias), total, k)
	}
	mass := make([]uint64, k)
	for c := range k {
		if p.keep[c] > total || uint64(p.alias[c]) >= k {
			tb.Fatalf("column %d: keep %d of %d, alias %d of %d endpoints", c, p.keep[c], total, p.alias[c], k)
		}
		mass[c] += p.keep[c]
		mass[p.alias[c]] += total - p.keep[c]
	}
	for i, m := range mass {
		if m != w[i]*k {
			tb.Fatalf("endpoint %d: alias mass %d, want weight %d × %d columns = %d", i, m, w[i], k, w[i]*k)
		}
	}
}

// checkLeastRequest asserts the structure of a least-request picker built
// from eps: the live set in order, the exact alias table, and that Pick
// returns ErrNoEndpoint exactly when nothing is live, else a live endpoint
// and (k ≥ 2) two distinct candidates.
func checkLeastRequest(tb fataler, eps []*endpoint.Endpoint, p *LeastRequest, picks int) {
	tb.Helper()
	live, w := liveOf(eps)
	if len(p.eps) != len(live) {
		tb.Fatalf("picker holds %d endpoints, want %d live", len(p.eps), len(live))
	}
	isLive := make(map[*endpoint.Endpoint]bool, len(live))
	for i, e := range live {
		if p.eps[i] != e || uint64(p.weights[i]) != w[i] {
			tb.Fatalf("endpoint %d: %v weight %d, want %v weight %d", i, p.eps[i], p.weights[i], e, w[i])
		}
		isLive[e] = true
	}
	if len(live) == 0 {
		for range 3 {
			if e, err := p.Pick(); e != nil || !errors.Is(err, ErrNoEndpoint) {
				tb.Fatalf("no live endpoint: Pick() = %v, %v; want nil, ErrNoEndpoint", e, err)
			}
		}
		return
	}
	checkAlias(tb, p, w)
	for range picks {
		e, err := p.Pick()
		if err != nil || !isLive[e] {
			tb.Fatalf("Pick() = %v, %v; want a live endpoint", e, err)
		}
		if len(live) >= 2 {
			if a, b := p.candidates(); a == b || a < 0 || b < 0 || a >= len(live) || b >= len(live) {
				tb.Fatalf("candidates %d, %d of %d endpoints; want two distinct", a, b, len(live))
			}
		}
	}
}

// checkHash asserts every structural invariant of a Maglev table built from
// eps: the live set ordered by address, the table size rule, a full table
// of valid indexes, every live endpoint holding at least one slot, each
// endpoint's slot count within the header's bound
// |c_i − M·w_i/W| < 1 + w_i/W_max + k·w_i/W, and the probe budget.
func checkHash(tb fataler, eps []*endpoint.Endpoint, p *ConsistentHash) {
	tb.Helper()
	live, w := liveOf(eps)
	k := len(live)
	if k == 0 {
		if len(p.table) != 0 || len(p.eps) != 0 {
			tb.Fatalf("no live endpoint, but a table of %d slots over %d endpoints", len(p.table), len(p.eps))
		}
		for _, key := range []uint64{0, 1, math.MaxUint64} {
			if e, err := p.PickKey(key); e != nil || !errors.Is(err, ErrNoEndpoint) {
				tb.Fatalf("PickKey(%d) = %v, %v; want nil, ErrNoEndpoint", key, e, err)
			}
		}
		if e, err := p.Pick(); e != nil || !errors.Is(err, ErrNoEndpoint) {
			tb.Fatalf("Pick() = %v, %v; want nil, ErrNoEndpoint", e, err)
		}
		return
	}
	if len(p.eps) != k {
		tb.Fatalf("picker holds %d endpoints, want %d live", len(p.eps), k)
	}
	weightOf := make(map[*endpoint.Endpoint]uint64, k)
	for i, e := range live {
		weightOf[e] = w[i]
	}
	var W, wmax uint64
	for i, e := range p.eps {
		x, ok := weightOf[e]
		if !ok || uint64(p.weights[i]) != x {
			tb.Fatalf("endpoint %d (%v, weight %d) is not a live endpoint with that weight", i, e, p.weights[i])
		}
		if i > 0 && p.eps[i-1].Address > e.Address {
			tb.Fatalf("endpoints %d, %d out of address order: %q > %q", i-1, i, p.eps[i-1].Address, e.Address)
		}
		W += x
		wmax = max(wmax, x)
	}
	M := uint64(len(p.table))
	if !isPrime(M) || M < tablePrimes[0] || M > tablePrimes[len(tablePrimes)-1] {
		tb.Fatalf("table size %d: want a table prime", M)
	}
	if M < min(uint64(k)*slotsPerHashEndpoint, tablePrimes[len(tablePrimes)-1]) {
		tb.Fatalf("table size %d below 100 × %d endpoints", M, k)
	}
	if p.probes > maglevProbeBudget*M {
		tb.Fatalf("%d probes, budget %d", p.probes, maglevProbeBudget*M)
	}
	count := make([]uint64, k)
	for s, i := range p.table {
		if int(i) >= k {
			tb.Fatalf("slot %d holds %d, want an index below %d (table not fully populated?)", s, i, k)
		}
		count[i]++
	}
	for i, c := range count {
		x := p.weights[i]
		if c == 0 && uint64(k) <= M {
			tb.Fatalf("endpoint %d (weight %d) holds no slot", i, x)
		}
		// |c − M·x/W| < 1 + x/wmax + k·x/W, times W·wmax to stay in integers.
		diff := new(big.Int).Sub(big.NewInt(0).Mul(bigU(c), bigU(W)), new(big.Int).Mul(bigU(M), bigU(uint64(x))))
		diff.Mul(diff.Abs(diff), bigU(wmax))
		bound := new(big.Int).Add(bigU(W*wmax), bigU(uint64(x)*W))
		bound.Add(bound, new(big.Int).Mul(bigU(uint64(k)*uint64(x)), bigU(wmax)))
		if diff.Cmp(bound) >= 0 {
			tb.Fatalf("endpoint %d (weight %d of %d): %d slots of %d, want %.1f within 1 + %d/%d + %d·%d/%d", i, x, W, c, M, float64(M)*float64(x)/float64(W), x, wmax, k, x, W)
		}
	}
}

func bigU(x uint64) *big.Int { return new(big.Int).SetUint64(x) }

// isPrime is trial division; n ≤ 5,000,011 here.
func isPrime(n uint64) bool {
	if n < 2 {
		return false
	}
	for d := uint64(2); d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}
