package balance

// Zoned: locality-aware picking over tiers of zones, with spill-over in
// proportion to lost capacity.
//
// SHARES. The design is Envoy's priority levels
// (source/common/upstream/load_balancer_impl.cc, "priority load" with an
// overprovisioning factor; docs: "Priority levels"). Tier i (the local zone
// first, then each failover zone in order, then, in levee, one last tier
// holding the endpoints of every zone the configuration does not list) has
// a total weight T_i (its non-drained endpoints) and a healthy weight H_i
// (those that serve). With overprovisioning factor o (1.4 by default):
//
//	health_i = min(1, o × H_i / T_i)          (0 when T_i = 0)
//	share_0  = health_0
//	share_i  = min(health_i, 1 − Σ_{j<i} share_j)
//
// and if Σ share_i < 1 (every tier degraded) the shares are divided by their
// sum, so the healthy capacity that is left takes all traffic. With o = 1.4
// a local zone at 100 % or at 72 % healthy keeps all traffic; at 50 % it
// keeps 70 % and the next tier takes 30 %; at 0 % the next tier takes it
// all. If no tier has healthy capacity every share is 0 and Pick answers
// ErrNoEndpoint. ZoneShares computes this; it is pure and O(tiers).
//
// PICK. The cumulative shares are precomputed as thresholds on [0, 2^63);
// a pick draws one 63-bit random number, finds the first tier whose
// threshold exceeds it (a linear scan over at most MaxTiers entries; a tier
// with share 0 is never chosen) and delegates to that tier's picker. So a
// pick costs one random draw, at most MaxTiers comparisons and the tier
// picker's own pick: no lock, no allocation. PickKey chooses the tier from
// the key (mixed with a fixed seed, so the tier choice and the tier
// picker's slot are independent) and hands the key to the tier's picker
// when it is a KeyPicker: the same key stays in the same tier and on the
// same endpoint while the shares and sets are stable.
//
// LOCKING. None: a Zoned is immutable; its tier pickers must be safe for
// concurrent use.

import (
	"math"
	"math/rand/v2"

	"github.com/levee-gw/levee/internal/endpoint"
)

// MaxTiers bounds the tiers of a Zoned picker (the local zone, up to
// MaxTiers-2 failover zones, and the tier of unlisted zones); NewZoned
// ignores tiers beyond it.
const MaxTiers = 18

// DefaultOverprovisioning is Envoy's default overprovisioning factor: a
// tier keeps all its traffic while at least 1/1.4 ≈ 71.4 % of its weight
// is healthy.
const DefaultOverprovisioning = 1.4

// zoneKeySeed separates the key's tier choice from the tier picker's use
// of the same key.
const zoneKeySeed = 0x9e3779b97f4a7c15

// ZoneShares computes each tier's share of traffic from its healthy and
// total weights (see the header of this file) into out, which must be at
// least as long as healthy; total must be as long as healthy. The shares
// sum to 1, or are all 0 when no tier has healthy capacity. An
// overprovisioning below 1 (or NaN) counts as 1. O(len(healthy)), no
// allocation.
func ZoneShares(healthy, total []uint64, overprovisioning float64, out []float64) {
	if !(overprovisioning >= 1) {
		overprovisioning = 1
	}
	left, sum := 1.0, 0.0
	for i := range healthy {
		h := 0.0
		if total[i] > 0 {
			h = min(1, overprovisioning*float64(min(healthy[i], total[i]))/float64(total[i]))
		}
		s := max(0, min(h, left))
		out[i] = s
		left -= s
		sum += s
	}
	if sum > 0 && sum < 1 {
		for i := range healthy {
			out[i] /= sum
		}
	}
}

// Zoned picks a tier by precomputed shares and delegates to its picker. It
// is an immutable snapshot, safe for concurrent use; Pick and PickKey do
// O(MaxTiers) work plus the tier picker's, take no lock and do not
// allocate.
type Zoned struct {
	tiers []Picker
	keyed []KeyPicker // tiers[i] as a KeyPicker, or nil
	// cum[i] is the upper bound (exclusive) on a 63-bit draw that picks
	// tier i; non-decreasing, the last positive share's entry is 2^63.
	cum []uint64
}

var _ Picker = (*Zoned)(nil)
var _ KeyPicker = (*Zoned)(nil)

// NewZoned returns a picker that sends a share shares[i] of picks to
// tiers[i]. shares should come from ZoneShares; negative and NaN shares
// count as 0 and the rest are normalised by their sum. A nil tier must
// have share 0. With no positive share, Pick returns ErrNoEndpoint.
// It copies both slices; at most MaxTiers tiers are used.
func NewZoned(tiers []Picker, shares []float64) *Zoned {
	n := min(len(tiers), len(shares), MaxTiers)
	z := &Zoned{tiers: make([]Picker, n), keyed: make([]KeyPicker, n), cum: make([]uint64, n)}
	sum := 0.0
	for i := range n {
		if s := shares[i]; s > 0 && tiers[i] != nil {
			sum += s
		}
	}
	acc, last := 0.0, -1
	for i := range n {
		z.tiers[i] = tiers[i]
		z.keyed[i], _ = tiers[i].(KeyPicker)
		if s := shares[i]; s > 0 && tiers[i] != nil && sum > 0 && !math.IsInf(sum, 0) {
			acc += s / sum
			last = i
		}
		z.cum[i] = uint64(min(acc, 1) * (1 << 63))
	}
	if last >= 0 {
		for i := last; i < n; i++ {
			z.cum[i] = 1 << 63
		}
	}
	return z
}

// tier returns the index of the tier a 63-bit draw r falls into, or -1.
func (z *Zoned) tier(r uint64) int {
	for i, c := range z.cum {
		if r < c {
			return i
		}
	}
	return -1
}

// Pick picks a tier by share, then an endpoint from that tier's picker.
func (z *Zoned) Pick() (*endpoint.Endpoint, error) {
	i := z.tier(rand.Uint64() >> 1)
	if i < 0 {
		return nil, ErrNoEndpoint
	}
	return z.tiers[i].Pick()
}

// PickKey picks the tier from key, then the endpoint with the tier's
// PickKey (or Pick when the tier picker takes no key).
func (z *Zoned) PickKey(key uint64) (*endpoint.Endpoint, error) {
	i := z.tier(mix64(key^zoneKeySeed) >> 1)
	if i < 0 {
		return nil, ErrNoEndpoint
	}
	if kp := z.keyed[i]; kp != nil {
		return kp.PickKey(key)
	}
	return z.tiers[i].Pick()
}

// Tiers returns the number of tiers.
func (z *Zoned) Tiers() int { return len(z.tiers) }
