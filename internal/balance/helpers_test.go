package balance

import (
	"errors"
	"fmt"

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
			clamped = append(clamped, uint64(min(e.Weight, endpoint.MaxWeight)))
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
