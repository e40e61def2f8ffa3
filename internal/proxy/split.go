package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/levee-gw/levee/internal/balance"
	"github.com/prometheus/client_golang/prometheus"
)

// A route's split: its requests shared across upstreams by weight. The
// split only picks a side; each side is a copy of the route with the
// side's Upstream (and that upstream's retry, when the route has none of
// its own) and its own metrics, so everything after the pick (admission,
// endpoint pick, retries and their budget, metrics, the access log) runs
// as for a plain route to that upstream.
//
// The pick, without stickiness, walks a smooth weighted order (the sides
// interleaved by weight, the same order nginx's smooth weighted round
// robin gives) with one atomic counter: every run of `sum of weights`
// requests gives each side exactly its weight, so the shares hold to the
// request, not on average. With stickiness, a request carrying the header
// or cookie goes to the side a hash of its value lands on: the value's
// hash is a point on [0, 1), the sides are consecutive ranges sized by
// weight, so a weight change moves only the clients whose point changes
// range. A side whose upstream has no serving endpoint (Balance.Down)
// gives its share to the serving sides, by their weights (equally when
// they all weigh 0), never a refusal while one of them serves.

// MaxSplitWeight bounds the sum of a split's weights (config's
// MaxSplitWeightSum): the smooth order holds one byte per unit of weight.
const MaxSplitWeight = 10000

// maxSplitSides bounds a split's sides (config's MaxSplitSides; a side
// index fits in the order's byte).
const maxSplitSides = 16

// Split shares a route's requests across its Sides. Build with NewSplit;
// the weights may change at runtime (SetWeights), everything else is fixed.
type Split struct {
	// Sides are the route's copies, one per upstream, in configuration
	// order. Immutable once the Split is in a Table.
	Sides []*Route
	// sticky, when set, names the header or cookie a request's side is
	// hashed from (Kind "header" or "cookie").
	sticky *HashOn
	w      atomic.Pointer[splitWeights]
	next   atomic.Uint64 // the smooth order's position
	spill  atomic.Uint64 // the position among serving sides of a weighted pick whose side is down
	// picks counts each side's requests (levee_route_split_requests_total),
	// parallel to Sides; set by NewTable.
	picks []prometheus.Counter
}

// splitWeights is one set of weights with what the pick needs, built
// once per change.
type splitWeights struct {
	w     []uint32 // parallel to Split.Sides
	cum   []uint32 // cum[i] is the sum of w[:i+1]
	order []uint8  // the smooth weighted order, len = total
	total uint32
}

// NewSplit returns a split over sides (2 to 16) with their weights
// (parallel). sticky, when not nil, is a header (canonical name) or
// cookie.
func NewSplit(sides []*Route, weights []int, sticky *HashOn) (*Split, error) {
	if len(sides) < 2 || len(sides) > maxSplitSides {
		return nil, fmt.Errorf("proxy: a split has 2 to %d sides, got %d", maxSplitSides, len(sides))
	}
	if sticky != nil && sticky.Kind != "header" && sticky.Kind != "cookie" {
		return nil, fmt.Errorf("proxy: a split is sticky by header or cookie, got %q", sticky.Kind)
	}
	s := &Split{Sides: sides, sticky: sticky}
	if err := s.SetWeights(weights); err != nil {
		return nil, err
	}
	return s, nil
}

// SetWeights replaces the weights (parallel to Sides; each >= 0, the sum
// 1 to MaxSplitWeight). Requests that start from now on see them.
func (s *Split) SetWeights(weights []int) error {
	if len(weights) != len(s.Sides) {
		return fmt.Errorf("proxy: %d weights for %d sides", len(weights), len(s.Sides))
	}
	sw := &splitWeights{w: make([]uint32, len(weights)), cum: make([]uint32, len(weights))}
	sum := 0
	for i, w := range weights {
		if w < 0 || w > MaxSplitWeight {
			return fmt.Errorf("proxy: weight %d out of 0..%d", w, MaxSplitWeight)
		}
		sum += w
		sw.w[i], sw.cum[i] = uint32(w), uint32(sum)
	}
	if sum == 0 || sum > MaxSplitWeight {
		return errors.New("proxy: a split's weights sum to 1..10000")
	}
	sw.total = uint32(sum)
	sw.order = smoothOrder(sw.w, sum)
	s.w.Store(sw)
	return nil
}

// Weights returns the current weights, parallel to Sides (a new slice).
func (s *Split) Weights() []int {
	sw := s.w.Load()
	out := make([]int, len(sw.w))
	for i, w := range sw.w {
		out[i] = int(w)
	}
	return out
}

// Sticky returns the split's sticky key; nil: none.
func (s *Split) Sticky() *HashOn { return s.sticky }

// smoothOrder is the smooth weighted round robin's sequence over w for
// one cycle of sum picks: each step every side gains its weight, the
// highest current value is picked and loses sum. O(sum × len(w)), at
// most 160,000 steps, once per weight change.
func smoothOrder(w []uint32, sum int) []uint8 {
	cur := make([]int, len(w))
	order := make([]uint8, sum)
	for k := range order {
		best := -1
		for i, wi := range w {
			cur[i] += int(wi)
			if wi > 0 && (best < 0 || cur[i] > cur[best]) {
				best = i
			}
		}
		cur[best] -= sum
		order[k] = uint8(best)
	}
	return order
}

// pick returns the side r goes to and counts it.
func (s *Split) pick(r *http.Request) *Route {
	sw := s.w.Load()
	i := s.choose(sw, r)
	if s.picks != nil {
		s.picks[i].Inc()
	}
	return s.Sides[i]
}

// choose is pick's decision: the side's index.
func (s *Split) choose(sw *splitWeights, r *http.Request) int {
	var point uint64 // in [0, 2^32): the request's place on the sides' ranges
	sticky := false
	if s.sticky != nil {
		if key, found := requestKey(r, s.sticky, ""); found {
			point, sticky = balance.HashKey(key)>>32, true
		}
	}
	var i int
	if sticky {
		i = rangeOf(sw.cum, uint32(point*uint64(sw.total)>>32))
	} else {
		point = s.next.Add(1) - 1
		i = int(sw.order[point%uint64(sw.total)])
	}
	if !s.Sides[i].Upstream.Balance().Down {
		return i
	}
	if !sticky {
		point = s.spill.Add(1) - 1 // its own counter: the order's positions of one side are not spread evenly
	}
	return s.fallback(sw, i, point, sticky)
}

// fallback picks among the serving sides when side i's upstream has none:
// by the serving sides' weights (equally when all of them weigh 0), from
// the same point, so a sticky client stays on one fallback side. With no
// side serving it returns i: the request then fails as a plain route's
// would.
func (s *Split) fallback(sw *splitWeights, i int, point uint64, sticky bool) int {
	var serving [maxSplitSides]bool
	var total, count uint32
	for j, side := range s.Sides {
		if !side.Upstream.Balance().Down {
			serving[j] = true
			total += sw.w[j]
			count++
		}
	}
	if count == 0 {
		return i
	}
	equal := total == 0
	if equal {
		total = count
	}
	var at uint32
	if sticky {
		at = uint32(point * uint64(total) >> 32)
	} else {
		at = uint32(point % uint64(total))
	}
	for j := range s.Sides {
		if !serving[j] {
			continue
		}
		w := sw.w[j]
		if equal {
			w = 1
		}
		if at < w {
			return j
		}
		at -= w
	}
	return i // not reached: at < total
}

// rangeOf returns the side whose range [cum[i-1], cum[i]) holds at
// (at < cum[len-1]). Sides are at most 16: a scan.
func rangeOf(cum []uint32, at uint32) int {
	for i, c := range cum {
		if at < c {
			return i
		}
	}
	return len(cum) - 1
}
