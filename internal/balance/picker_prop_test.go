package balance

import (
	"math"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"github.com/levee-gw/levee/internal/endpoint"
)

// hundredthsWeightGen draws weights in the hundredths unit the new pickers
// are written for: drained, 1, the cap 1,000,000 and above it, small
// repeating values, and anything.
func hundredthsWeightGen() *rapid.Generator[uint32] {
	return rapid.OneOf(
		rapid.Just[uint32](0),
		rapid.Just[uint32](1),
		rapid.Just[uint32](maxWeight),
		rapid.Uint32Range(1, 16),
		rapid.Uint32Range(1, maxWeight),
		rapid.Uint32Range(maxWeight+1, math.MaxUint32),
	)
}

// hashEndpointsGen draws minN..maxN endpoints with hundredths weights and
// distinct addresses, some entries nil.
func hashEndpointsGen(minN, maxN int) *rapid.Generator[[]*endpoint.Endpoint] {
	return rapid.Custom(func(t *rapid.T) []*endpoint.Endpoint {
		w := weightsGen(hundredthsWeightGen(), minN, maxN).Draw(t, "weights")
		eps := addrEndpoints(w...)
		if every := rapid.IntRange(0, 10).Draw(t, "nilEvery"); every > 0 {
			for i := every - 1; i < len(eps); i += every {
				eps[i] = nil
			}
		}
		return eps
	})
}

// TestPropLeastRequestInvariants: for any endpoint set (up to 2000, zeros,
// duplicates, maxima, nils) and any inflight counts, the build returns, the
// alias table gives every live endpoint exactly its weight, every pick
// returns a live endpoint from two distinct candidates (so within its
// bound of 6 random numbers), and ErrNoEndpoint comes iff nothing is live.
func TestPropLeastRequestInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		eps := hashEndpointsGen(0, 2000).Draw(t, "eps")
		for _, e := range eps {
			if e != nil {
				e.Stats.Inflight.Store(rapid.Int64Range(-2, 1<<50).Draw(t, "inflight"))
			}
		}
		ewma := rapid.Bool().Draw(t, "ewma")
		var draws int
		r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
		p := NewLeastRequest(eps, LeastRequestOptions{EWMA: ewma, Rand: func() uint64 { draws++; return r.Uint64() }})
		const picks = 200
		checkLeastRequest(t, eps, p, picks)
		// Each checked pick also calls candidates() once: at most 6 + 6.
		if draws > picks*12 {
			t.Fatalf("%d random numbers for %d picks, bound %d", draws, picks, picks*12)
		}
	})
}

// TestPropLeastRequestIdleShares: with nothing in flight, shares follow
// weights within 5σ + 1 per endpoint over 20,000 picks (small sets, so
// that the run stays short).
func TestPropLeastRequestIdleShares(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := weightsGen(hundredthsWeightGen(), 1, 8).Draw(t, "weights")
		eps := endpoints(w...)
		r := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 2))
		p := NewLeastRequest(eps, LeastRequestOptions{Rand: r.Uint64})
		if len(p.eps) == 0 {
			checkLeastRequest(t, eps, p, 1)
			return
		}
		const n = 20000
		idx := map[*endpoint.Endpoint]int{}
		for i, e := range p.eps {
			idx[e] = i
		}
		got := make([]int, len(p.eps))
		for range n {
			e, err := p.Pick()
			if err != nil {
				t.Fatal(err)
			}
			got[idx[e]]++
		}
		var W float64
		for _, x := range p.weights {
			W += float64(x)
		}
		for i, c := range got {
			q := float64(p.weights[i]) / W
			if tol := 5*math.Sqrt(n*q*(1-q)) + 1; math.Abs(float64(c)-n*q) > tol {
				t.Fatalf("endpoint %d (weight %d): %d of %d, want %.0f ± %.0f", i, p.weights[i], c, n, n*q, tol)
			}
		}
		// One endpoint loaded far above the others: it only wins when the
		// other candidate is as loaded per weight, which none is.
		if len(p.eps) >= 2 {
			p.eps[0].Stats.Inflight.Store(1 << 30)
			for range 1000 {
				if e, _ := p.Pick(); e == p.eps[0] {
					t.Fatalf("loaded endpoint picked (weights %v)", p.weights)
				}
			}
		}
	})
}

// TestPropConsistentHashInvariants: for any endpoint set (up to 2000, zeros,
// duplicates, maxima, nils) the build returns within its probe budget and
// checkHash's invariants hold: size rule, full table, every live endpoint
// holding its weight share within 1 + w_i/W_max + k·w_i/W slots; PickKey
// returns a live endpoint for any key, ErrNoEndpoint iff nothing is live.
// Each build fills at least 65,537 slots, so only the first 50 of rapid's
// cases are checked (the rest return at once) to keep the race run short.
func TestPropConsistentHashInvariants(t *testing.T) {
	cases := 0
	rapid.Check(t, func(t *rapid.T) {
		if cases++; cases > 50 {
			return
		}
		eps := hashEndpointsGen(0, 2000).Draw(t, "eps")
		p := NewConsistentHash(eps, HashOptions{})
		checkHash(t, eps, p)
		live := map[*endpoint.Endpoint]bool{}
		for _, e := range eps {
			if e != nil && e.Weight > 0 {
				live[e] = true
			}
		}
		for range 100 {
			e, err := p.PickKey(rapid.Uint64().Draw(t, "key"))
			if len(live) == 0 {
				if e != nil || err == nil {
					t.Fatalf("no live endpoint: PickKey = %v, %v", e, err)
				}
				continue
			}
			if err != nil || !live[e] {
				t.Fatalf("PickKey = %v, %v; want a live endpoint", e, err)
			}
		}
	})
}

// TestPropConsistentHashOrderIndependent: any permutation of the input
// builds the same table. The first 25 of rapid's cases are checked.
func TestPropConsistentHashOrderIndependent(t *testing.T) {
	cases := 0
	rapid.Check(t, func(t *rapid.T) {
		if cases++; cases > 25 {
			return
		}
		eps := hashEndpointsGen(1, 300).Draw(t, "eps")
		perm := rapid.Permutation(eps).Draw(t, "perm")
		a, b := NewConsistentHash(eps, HashOptions{}), NewConsistentHash(perm, HashOptions{})
		if len(a.table) != len(b.table) {
			t.Fatalf("table sizes %d, %d", len(a.table), len(b.table))
		}
		for s := range a.table {
			if a.eps[a.table[s]].Address != b.eps[b.table[s]].Address {
				t.Fatalf("slot %d differs", s)
			}
		}
	})
}
