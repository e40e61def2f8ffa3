package balance

import (
	"math/bits"

	"github.com/levee-gw/levee/internal/endpoint"
)

// maxWeight is the largest weight the least-request and consistent-hash
// pickers use: 10000.00 in hundredths. A larger weight counts as maxWeight.
// It is local rather than endpoint.MaxWeight so that the pickers' arithmetic
// bounds (stated in their headers) do not move when the endpoint package's
// unit does; every product these pickers form stays below 2^63 for weights up
// to this cap.
const maxWeight = 1_000_000

// liveSet returns the endpoints of eps that can be picked (non-nil, weight >
// 0), in input order, and their weights clamped to limit. A nil entry counts
// as drained, so that one bad record cannot panic the request path. O(n).
// NewLeastRequest, NewConsistentHash and Guarded filter through it.
func liveSet(eps []*endpoint.Endpoint, limit uint32) (live []*endpoint.Endpoint, w []uint32) {
	for _, e := range eps {
		if e == nil || e.Weight == 0 {
			continue
		}
		live = append(live, e)
		w = append(w, min(e.Weight, limit))
	}
	return live, w
}

// uniform maps a uniform 64-bit value r to [0, n) by multiply-shift
// (Lemire, "Fast random integer generation in an interval", 2019): the high
// word of r·n. The bias is below n/2^64. It also returns the low word, which
// for a uniform r is (up to that bias) uniform on a grid of spacing n and can
// serve as a second, independent fraction.
func uniform(r, n uint64) (idx, frac uint64) {
	return bits.Mul64(r, n)
}

// mix64 is the 64-bit finaliser of MurmurHash3 (fmix64, Austin Appleby,
// public domain): a bijection in which every input bit affects every output
// bit.
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// FNV-1a 64-bit constants (Fowler, Noll, Vo; IETF draft-eastlake-fnv).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// hashString is FNV-1a 64 over s, started from the offset basis xor seed,
// then mix64. O(len(s)), no allocation.
func hashString(s string, seed uint64) uint64 {
	h := uint64(fnvOffset64) ^ seed
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return mix64(h)
}

// HashKey hashes a request attribute (a header, cookie or query value, a
// client IP in text form, a path) to the 64-bit key ConsistentHash.PickKey
// takes. It is FNV-1a 64 with its standard offset basis followed by the
// MurmurHash3 finaliser, so it is the same in every process and release
// (keys stay on their endpoints across restarts), spreads similar strings
// apart, takes O(len(s)) time and does not allocate. It is not a keyed hash:
// a client that can choose its key can choose its endpoint.
func HashKey(s string) uint64 { return hashString(s, 0) }

// HashBytes is HashKey over b: HashBytes([]byte(s)) == HashKey(s). It is for
// keys already held as bytes, such as a client address from netip.Addr.As16,
// and does not allocate.
func HashBytes(b []byte) uint64 {
	h := uint64(fnvOffset64)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return mix64(h)
}
