package balance

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/levee-gw/levee/internal/endpoint"
)

// weightGen draws any uint32 weight, favouring the edges: drained, 1, the
// maximum, above the maximum, and small values that repeat.
func weightGen() *rapid.Generator[uint32] {
	return rapid.OneOf(
		rapid.Just[uint32](0),
		rapid.Just[uint32](1),
		rapid.Just[uint32](endpoint.MaxWeight*endpoint.WeightScale),
		rapid.Uint32Range(1, 16),
		rapid.Uint32Range(1, endpoint.MaxWeight),
		rapid.Uint32Range(endpoint.MaxWeight*endpoint.WeightScale+1, math.MaxUint32),
	)
}

// weightsGen draws a slice of minN to maxN weights from elem. (The length
// is drawn first: rapid.SliceOfN alone favours short slices, and the large
// pools are the point.)
func weightsGen(elem *rapid.Generator[uint32], minN, maxN int) *rapid.Generator[[]uint32] {
	return rapid.Custom(func(t *rapid.T) []uint32 {
		n := rapid.IntRange(minN, maxN).Draw(t, "n")
		return rapid.SliceOfN(elem, n, n).Draw(t, "weights")
	})
}

// endpointsGen draws between minN and maxN endpoints with weights from
// weightGen, some of them nil.
func endpointsGen(minN, maxN int) *rapid.Generator[[]*endpoint.Endpoint] {
	return rapid.Custom(func(t *rapid.T) []*endpoint.Endpoint {
		w := weightsGen(weightGen(), minN, maxN).Draw(t, "weights")
		eps := endpoints(w...)
		if every := rapid.IntRange(0, 10).Draw(t, "nilEvery"); every > 0 {
			for i := every - 1; i < len(eps); i += every {
				eps[i] = nil
			}
		}
		return eps
	})
}

// TestPropSmoothWeightedInvariants: for any endpoint set (drained, nil,
// duplicate, maximal and over-maximal weights, up to 2000 endpoints) the
// build returns, and checkPicker's invariants hold from any cursor position:
// the cycle is at most the cap, every live endpoint is picked exactly its
// apportioned weight per cycle, a drained one never, the share error is
// within the documented bound, and the order is NGINX's (exact regime) or
// within the Pfair lag bound.
func TestPropSmoothWeightedInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		eps := endpointsGen(0, 2000).Draw(t, "eps")
		p := NewSmoothWeighted(eps)
		for range rapid.IntRange(0, 1000).Draw(t, "skip") {
			_, _ = p.Pick()
		}
		checkPicker(t, eps, p)
	})
}

// TestPropSmoothWeightedMatchesNGINX compares the picker with the reference
// NGINX loop (O(n) per pick) over small weight vectors: the same sequence
// over three full cycles, including drained entries, duplicates, and
// weights scaled by a common factor (which the picker divides out).
func TestPropSmoothWeightedMatchesNGINX(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := weightsGen(rapid.OneOf(rapid.Just[uint32](0), rapid.Uint32Range(1, 8), rapid.Uint32Range(1, 60)), 1, 10).Draw(t, "weights")
		scale := rapid.OneOf(rapid.Just[uint32](1), rapid.Uint32Range(1, endpoint.MaxWeight/60)).Draw(t, "scale")
		w := make([]uint32, len(base))
		var cycle int
		for i, x := range base {
			w[i] = x * scale
			cycle += int(x)
		}
		eps := endpoints(w...)
		p := NewSmoothWeighted(eps)
		if cycle == 0 {
			checkPicker(t, eps, p)
			return
		}
		if !p.exact {
			t.Fatalf("weights %v built in the Pfair regime", w)
		}
		want := refNGINX(w, 3*cycle)
		for s, i := range want {
			e, err := p.Pick()
			if err != nil {
				t.Fatalf("pick %d: %v", s, err)
			}
			if e != eps[i] {
				t.Fatalf("weights %v, pick %d: %s, NGINX picks %s", w, s, e.Address, eps[i].Address)
			}
		}
	})
}

// TestPropSmoothWeightedLargePools draws pools big enough for the Pfair
// regime and checks all invariants there, the lag bound included.
func TestPropSmoothWeightedLargePools(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := weightsGen(rapid.OneOf(rapid.Just[uint32](1), rapid.Just[uint32](endpoint.MaxWeight*endpoint.WeightScale), rapid.Uint32Range(1, endpoint.MaxWeight)), 300, 2000).Draw(t, "weights")
		eps := endpoints(w...)
		p := NewSmoothWeighted(eps)
		if p.exact {
			t.Fatalf("%d endpoints, L = %d: built in the exact regime", len(eps), len(p.sched))
		}
		checkPicker(t, eps, p)
	})
}

// TestPropPfairLag checks the Pfair construction itself on small shapes the
// regime choice would send to the exact simulation: exact counts per cycle
// and |c_i(t) − t·w_i/L| < 1 at every prefix.
func TestPropPfairLag(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := weightsGen(rapid.OneOf(rapid.Just[uint32](1), rapid.Uint32Range(1, 5), rapid.Uint32Range(1, 200)), 1, 60).Draw(t, "weights")
		var total int
		for _, x := range w {
			total += int(x)
		}
		checkLag(t, pfairSchedule(w, total), w)
	})
}

// TestNGINXOrderCanLagMoreThanOne backs the header's remark that NGINX's
// order does not keep every endpoint within one pick of its share, which is
// why the Pfair regime states its own bound instead of claiming NGINX's.
func TestNGINXOrderCanLagMoreThanOne(t *testing.T) {
	w := []uint32{1, 1, 1, 1, 3, 3, 3, 3}
	L := int64(16)
	sched := nginxSchedule(w, int(L))
	count := make([]int64, len(w))
	worst := int64(0) // in 1/L picks
	for s, i := range sched {
		for j := range w {
			lag := int64(s)*int64(w[j]) - count[j]*L
			worst = max(worst, lag, -lag)
		}
		count[i]++
	}
	if worst <= L {
		t.Fatalf("NGINX order for %v lags at most %d/%d picks; the header says it exceeds 1", w, worst, L)
	}
	checkLag(t, pfairSchedule(w, int(L)), w)
}
