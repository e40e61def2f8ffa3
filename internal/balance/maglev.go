package balance

// Consistent hashing by weighted Maglev.
//
// SOURCE. Eisenbud et al., "Maglev: A Fast and Reliable Software Network
// Load Balancer", NSDI 2016, section 3.4 (Pseudocode 1), with weights given
// as turns in the population loop the way Envoy's weighted Maglev does
// (source/extensions/load_balancing_policies/maglev/maglev_lb.cc: an
// endpoint of weight w takes a turn in an iteration when iteration·w has
// reached its target, then its target grows by the largest weight).
//
// TABLE. A lookup table of M slots, M prime. Each live endpoint i (non-nil,
// weight > 0; weights above maxWeight = 1,000,000 count as maxWeight) gets a
// permutation of the slots from its address alone, so the table does not
// depend on the order of the input slice:
//
//	offset_i = h1(address) mod M,  skip_i = h2(address) mod (M−1) + 1
//	perm_i(j) = (offset_i + j·skip_i) mod M,  j = 0, 1, ..., M−1
//
// h1 and h2 are FNV-1a 64 under two fixed seeds followed by the MurmurHash3
// finaliser. M is prime and 1 ≤ skip_i < M, so perm_i visits every slot
// exactly once. Live endpoints are ordered by address (then weight), and
// that order breaks ties below.
//
// POPULATION. Endpoints take turns; a turn claims the next slot of the
// endpoint's permutation that is still empty. With W_max the largest live
// weight, endpoint i's turn number j (j = 0, 1, 2, ...) comes in iteration
//
//	t_ij = ⌈j·W_max / w_i⌉
//
// and the turns of one iteration go in address order. So an endpoint of the
// largest weight takes a turn every iteration, one of a third of it every
// third iteration, and every live endpoint takes its first turn (j = 0) in
// iteration 0: no live endpoint is left without a slot while k ≤ M. (Envoy
// starts each endpoint at j = 1, so an endpoint far lighter than the rest
// can end with no slot at all.) Turns are served in (t_ij, address order)
// order from a binary heap of the k live endpoints (the edfHeap of
// smooth.go), so iterations in which a light endpoint has no turn cost
// nothing: unlike Envoy's loop over every endpoint in every iteration, the
// work does not grow with the ratio of the weights. The loop stops after
// exactly M turns, when the table is full.
//
// SHARES. After T complete iterations endpoint i has taken ⌊T·w_i/W_max⌋+1
// turns, one slot each. Summing over the iteration in which the table
// fills, its slot count c_i satisfies
//
//	|c_i − M·w_i/W| < 1 + w_i/W_max + k·w_i/W ≤ 2 + k·w_i/W   (W = Σ w)
//
// which for equal weights is under 3 slots of the ≥ 100 each holds (3%),
// and for any weights is at most 2 slots plus k·w_i/W ≤ k/M·(M·w_i/W), that
// is 1% of the ideal count when M ≥ 100·k. The test checks this bound on
// every built table.
//
// TABLE SIZE. M is the smallest prime of tablePrimes (65,537, then the next
// prime above each power of two up to 2^22, then 5,000,011) that is at least
// 100·k, the paper's "M ≫ N" at its recommended ratio; above 50,000 live
// endpoints it stays 5,000,011 (20 MiB of table) and each endpoint's share
// is coarser (under 100 slots). When HashOptions.Prev is given and its M is
// still at least 100·k and not larger than the size chosen for 4·k, that M
// is kept, so draining or removing an endpoint does not change M (a new M
// remaps almost every key).
//
// DISRUPTION. Plain Maglev moves more than the keys a removed endpoint
// held: each slot it held is taken by another endpoint's turn, whose own
// later turn then lands on a different slot, and so on; the cascades grow
// as M/n shrinks (measured: slots changing owner 1.02/n at n = 10, 1.57/n
// at n = 100, 6.8/n at n = 1000; Envoy documents "approximately double").
// So a rebuild from Prev (same M) first gives every surviving endpoint back
// the slots it held, up to the number of turns the turn order grants it
// (lowest slots first), and its turns fill only the slots left free. When
// one of n endpoints leaves, exactly its slots change owner and no other
// key moves (TestConsistentHashDisruption: 1.000/n, 1.001/n, 0.999/n of
// slots at n = 10, 100, 1000; 0 other keys). A weight change or a new
// endpoint frees only the excess slots of those that now get fewer turns.
// The price: a table rebuilt from Prev depends on its history, not only on
// the endpoint set, so two levee instances with different histories may
// map a key differently; built without Prev, the table is a function of
// the endpoint set alone.
//
// WORK. Build: O(n) filtering, O(k log k) sort, M heap replacements of
// O(log k) each, and probes: every probe of endpoint i steps it along its
// own permutation, and it never needs more than M steps in all (an empty
// slot is always among the ones it has not visited), so probes ≤ k·M in
// the worst case. Expected, each probe hits a pseudo-random slot and the
// total is about M·ln M (coupon collector: 11·M at M = 65,537). To bound
// the build regardless of addresses, probes are capped at
// maglevProbeBudget·M = 64·M; were the cap ever reached, every remaining
// turn takes the next empty slot of one forward sweep of the table (O(M) in
// all). Shares keep the bound above (turns are unchanged); only the
// stability of those last slots is lost. Memory: 4·M bytes of table plus
// O(k). PickKey: one multiply, one mix and two loads, O(1). Measured with
// BenchmarkConsistentHashBuild on a shared, busy 2-vCPU VM: 12.6 probes per
// slot and about 0.3 s for 10,000 endpoints (M = 1,048,583), most of it
// cache misses on the 4 MiB table.
//
// LOCKING. None. The table is never written after NewConsistentHash
// returns; Pick draws its random key from math/rand/v2's goroutine-safe
// generator.

import (
	"cmp"
	"math/rand/v2"
	"slices"

	"github.com/levee-gw/levee/internal/endpoint"
)

// tablePrimes are the Maglev table sizes, smallest first: 65,537 (Maglev's
// and Envoy's default), the smallest prime above each power of two 2^17 ..
// 2^22, and the cap 5,000,011. TestTablePrimes checks each is prime.
var tablePrimes = [...]uint64{65537, 131101, 262147, 524309, 1048583, 2097169, 4194319, 5000011}

const (
	// slotsPerHashEndpoint is the least number of table slots per live
	// endpoint M aims for: M ≥ 100·k.
	slotsPerHashEndpoint = 100
	// maglevProbeBudget caps the probes of one build at this many per slot
	// (the expected number is about ln M ≤ 16).
	maglevProbeBudget = 64
	// emptySlot marks an unclaimed slot during the build.
	emptySlot = ^uint32(0)
	// Seeds for the two address hashes.
	seedOffset = 0x9e3779b97f4a7c15
	seedSkip   = 0xbf58476d1ce4e5b9
)

// tableSize returns the smallest table prime ≥ 100·k, or the largest one.
func tableSize(k int) uint64 {
	need := uint64(k) * slotsPerHashEndpoint
	for _, p := range tablePrimes {
		if p >= need {
			return p
		}
	}
	return tablePrimes[len(tablePrimes)-1]
}

// HashOptions configures NewConsistentHash. The zero value is ready to use.
type HashOptions struct {
	// Prev is the picker this one replaces, if any. Its table size is kept
	// while it still holds at least 100 slots per live endpoint and is not
	// more than the size chosen for four times as many, so that a drain or a
	// removal moves about 1/n of the keys instead of all of them. nil: the
	// size is chosen from the live count alone.
	Prev *ConsistentHash
}

// ConsistentHash is a weighted Maglev Picker: PickKey maps a 64-bit key to
// an endpoint, the same for the same endpoint set in any order (so every
// levee instance agrees), most keys keep their endpoint when one endpoint
// leaves (the measured disruption is in the algorithm header in this file),
// and each endpoint's share of keys follows its weight. It is an immutable snapshot, safe for
// concurrent use; PickKey and Pick are O(1), never block, take no lock and
// do not allocate. The zero value has no endpoints.
type ConsistentHash struct {
	// eps are the live endpoints ordered by address, then weight.
	eps []*endpoint.Endpoint
	// weights are their clamped weights, parallel to eps.
	weights []uint32
	// table maps slot → index in eps; len(table) = M, or 0 with no endpoint.
	table []uint32
	// probes and swept record the build's work, for tests: the probes made
	// and whether the probe budget ran out and the sweep filled the rest.
	probes uint64
	swept  bool
}

var _ Picker = (*ConsistentHash)(nil)

// NewConsistentHash builds a weighted Maglev table over eps. It copies what
// it needs and neither keeps nor modifies eps. Each endpoint's Weight is read
// once: 0 means drained (never picked), a weight above 1,000,000 counts as
// 1,000,000, a nil entry counts as drained. Addresses should be unique, as a
// validated set's are; the table depends on the addresses and weights, not
// on their order in eps. If no endpoint is live, PickKey and Pick return
// ErrNoEndpoint.
//
// Building takes O(n + k log k + M log k) time plus at most 64·M probes,
// and O(M + n) memory, where k is the number of live endpoints and M the
// table size (65,537 to 5,000,011); it terminates for any input.
func NewConsistentHash(eps []*endpoint.Endpoint, o HashOptions) *ConsistentHash {
	live, w := liveSet(eps, maxWeight)
	p := &ConsistentHash{}
	k := len(live)
	if k == 0 {
		return p
	}
	order := make([]int, k)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(live[a].Address, live[b].Address); c != 0 {
			return c
		}
		return cmp.Compare(w[a], w[b])
	})
	p.eps = make([]*endpoint.Endpoint, k)
	p.weights = make([]uint32, k)
	for j, i := range order {
		p.eps[j], p.weights[j] = live[i], w[i]
	}
	m := tableSize(k)
	var keep []uint32
	if o.Prev != nil {
		if pm := uint64(len(o.Prev.table)); pm >= uint64(k)*slotsPerHashEndpoint && pm <= tableSize(4*k) {
			m = pm
			keep = carryOver(o.Prev, p.eps)
		}
	}
	p.table, p.probes, p.swept = populate(p.eps, p.weights, m, maglevProbeBudget*m, keep)
	return p
}

// carryOver maps prev's table onto the new endpoint order: entry s is the
// new index of the endpoint that owned slot s in prev (matched by
// address), or emptySlot when that endpoint is gone. O(M + n).
func carryOver(prev *ConsistentHash, eps []*endpoint.Endpoint) []uint32 {
	index := make(map[string]uint32, len(eps))
	for j, e := range eps {
		index[e.Address] = uint32(j)
	}
	remap := make([]uint32, len(prev.eps))
	for i, e := range prev.eps {
		if j, ok := index[e.Address]; ok {
			remap[i] = j
		} else {
			remap[i] = emptySlot
		}
	}
	keep := make([]uint32, len(prev.table))
	for s, owner := range prev.table {
		keep[s] = remap[owner]
	}
	return keep
}

// populate fills a table of m slots (m prime) for the live endpoints eps
// with weights w (each 1..maxWeight), in the order the header describes,
// making at most budget probes before it switches to the sweep. It returns
// the table, the probes made and whether the sweep was used.
//
// keep, when not nil (a rebuild from a previous table of the same size),
// gives each slot's previous owner (or emptySlot). Each endpoint first keeps
// as many of its previous slots as the turn order grants it, lowest slots
// first, and its turns fill only the rest; so when one of n endpoints
// leaves, only its slots (about 1/n of the keys) move, instead of Maglev's
// usual cascade. The table then depends on the previous one, not only on
// the endpoint set; without keep it is a function of the set alone.
func populate(eps []*endpoint.Endpoint, w []uint32, m, budget uint64, keep []uint32) (table []uint32, probes uint64, swept bool) {
	k := len(eps)
	table = make([]uint32, m)
	for i := range table {
		table[i] = emptySlot
	}
	var wmax uint64
	for _, x := range w {
		wmax = max(wmax, uint64(x))
	}
	// prefilled[i] counts the turns of endpoint i already covered by slots
	// it keeps from the previous table.
	prefilled := make([]uint64, k)
	if keep != nil {
		quota := turnCounts(w, wmax, m)
		for s, owner := range keep {
			if owner != emptySlot && prefilled[owner] < quota[owner] {
				table[s] = owner
				prefilled[owner]++
			}
		}
	}
	pos := make([]uint64, k)   // next slot of each permutation to look at
	skip := make([]uint64, k)  // each permutation's step, 1..m−1
	turns := make([]uint64, k) // turns taken so far
	h := edfHeap{dl: make([]uint64, k), h: make([]int32, k)}
	for i, e := range eps {
		pos[i] = hashString(e.Address, seedOffset) % m
		skip[i] = hashString(e.Address, seedSkip)%(m-1) + 1
		h.h[i] = int32(i) // turn 0 of everyone is in iteration 0
	}
	h.init()
	var sweep uint64 // in sweep mode, every slot before it is full
	for range m {    // every turn fills exactly one slot (or was kept)
		i := h.h[0]
		if prefilled[i] > 0 {
			prefilled[i]--
			turns[i]++
			x := uint64(w[i])
			h.dl[i] = (turns[i]*wmax + x - 1) / x
			h.down(0)
			continue
		}
		if !swept {
			// Bounded: an empty slot exists (fewer than m turns so far) and
			// lies among the slots perm_i has not visited yet.
			for table[pos[i]] != emptySlot && probes < budget {
				probes++
				if pos[i] += skip[i]; pos[i] >= m {
					pos[i] -= m
				}
			}
			swept = table[pos[i]] != emptySlot
		}
		c := pos[i]
		if swept {
			for table[sweep] != emptySlot { // sweep only moves forward: ≤ m steps in all
				sweep++
			}
			c = sweep
		}
		table[c] = uint32(i)
		if pos[i] += skip[i]; pos[i] >= m {
			pos[i] -= m
		}
		turns[i]++
		x := uint64(w[i])
		h.dl[i] = (turns[i]*wmax + x - 1) / x // ⌈j·W_max/w_i⌉ ≤ 5·10^12
		h.down(0)
	}
	return table, probes, swept
}

// turnCounts returns how many of the m turns each endpoint gets in
// populate's turn order (the same heap, without probing): O(m log k).
func turnCounts(w []uint32, wmax, m uint64) []uint64 {
	k := len(w)
	turns := make([]uint64, k)
	h := edfHeap{dl: make([]uint64, k), h: make([]int32, k)}
	for i := range w {
		h.h[i] = int32(i)
	}
	h.init()
	for range m {
		i := h.h[0]
		turns[i]++
		x := uint64(w[i])
		h.dl[i] = (turns[i]*wmax + x - 1) / x
		h.down(0)
	}
	return turns
}

// PickKey returns the endpoint that owns key, or ErrNoEndpoint if no
// endpoint is live. The key is mixed again before use, so any 64-bit value
// (HashKey of a header, a numeric ID) spreads over the table. It is one
// table lookup: O(1), lock-free and allocation-free.
func (p *ConsistentHash) PickKey(key uint64) (*endpoint.Endpoint, error) {
	if len(p.table) == 0 {
		return nil, ErrNoEndpoint
	}
	slot, _ := uniform(mix64(key), uint64(len(p.table)))
	return p.eps[p.table[slot]], nil
}

// Pick returns the endpoint for a random key, so that a ConsistentHash is a
// Picker when a request carries no key (for example the header is absent):
// the endpoints then share requests by weight. O(1), lock-free and
// allocation-free.
func (p *ConsistentHash) Pick() (*endpoint.Endpoint, error) {
	return p.PickKey(rand.Uint64())
}

// TableSize returns M, the number of slots in the lookup table (0 when no
// endpoint is live).
func (p *ConsistentHash) TableSize() int { return len(p.table) }
