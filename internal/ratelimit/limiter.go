package ratelimit

import (
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Policy is what one key is held to: a Rate, a Quota, or both. The zero
// Rate (or Quota) in a Policy means no rate limit (or no quota); the zero
// Policy admits everything.
type Policy struct {
	Rate  Rate
	Quota Quota
}

// Options configure a Limiter.
type Options struct {
	// Capacity is the most keys the Limiter holds state for, 1 to 2^26.
	// Size it above the number of keys that are busy at once (for app
	// quotas: every app with a quota, since evicting a key with a live
	// quota count forgives that count). Required; there is no default.
	Capacity int
}

// maxCapacity bounds Options.Capacity (64 Mi keys, a few GiB).
const maxCapacity = 1 << 26

// maxShards is the shard count for large capacities: enough that two
// cores rarely meet on one shard lock, few enough that each shard holds
// many keys and its eviction sample is meaningful.
const maxShards = 64

// evictionSample is how many entries of a full shard one insertion looks
// at to choose its victim: the bound on eviction work per new key.
const evictionSample = 8

// Limiter holds GCRA and quota state for many keys (app IDs, app×route
// pairs, client addresses as netip.Addr) in bounded memory, and decides
// requests against the Policy passed with each call, so a changed policy
// applies at once to existing state. Safe for concurrent use; starts no
// goroutine. Create it with New; the zero Limiter is not usable.
//
// State lives in a power-of-two number of shards (up to 64), each a map
// behind an RWMutex with a cap of about Capacity/shards entries (the caps
// sum to Capacity): a key already present costs a read lock, a hash and a
// map lookup, and no allocation.
// A new key in a full shard first evicts one entry chosen among
// evictionSample (8) entries of the shard in the map's random iteration
// order: the first idle one (GCRA TAT ≤ now and no live quota count:
// evicting it loses nothing), else the one that would become idle first
// (counted in Stats.EvictedBusy: that key's next request finds a full
// burst and an unused quota). A decision racing with the eviction of its
// own key updates the evicted state and is not seen by the key's next
// request, so at most the requests in flight at that instant are admitted
// twice.
type Limiter[K comparable] struct {
	seed   maphash.Seed
	shards []shard[K]
	mask   uint64

	evictions   atomic.Uint64
	evictedBusy atomic.Uint64
}

type shard[K comparable] struct {
	mu  sync.RWMutex
	m   map[K]*entry
	cap int            // most entries in m; the shards' caps sum to Capacity
	_   [128 - 40]byte // one shard per pair of cache lines
}

// entry is one key's state under both kinds of limit.
type entry struct {
	rate  Cell
	quota QuotaCell
}

// New returns a Limiter for keys of type K, or an error naming the bad
// option.
func New[K comparable](o Options) (*Limiter[K], error) {
	if o.Capacity < 1 || o.Capacity > maxCapacity {
		return nil, fmt.Errorf("ratelimit: capacity must be from 1 to %d keys, got %d", maxCapacity, o.Capacity)
	}
	n := 1
	for n < maxShards && n*2*16 <= o.Capacity { // at least 16 keys per shard
		n *= 2
	}
	l := &Limiter[K]{seed: maphash.MakeSeed(), shards: make([]shard[K], n), mask: uint64(n - 1)}
	for i := range l.shards {
		c := o.Capacity / n
		if i < o.Capacity%n {
			c++
		}
		l.shards[i].cap = c
		// Maps grow with the keys they get: Capacity is a bound, not a
		// reservation (a limiter sized for a million client addresses
		// must not cost ~100 MB before the first request).
		l.shards[i].m = make(map[K]*entry)
	}
	return l, nil
}

// Allow decides one request of key at now against p and records it:
//
//  1. the rate limit first: a request it refuses is answered with its
//     Decision and touches no quota;
//  2. then the quota: a request it refuses keeps the rate token it took.
//     Not refunding is deliberate: the rate limit bounds how fast a key
//     can make levee work, and refusing is work; a client hammering an
//     exhausted quota is therefore also rate limited.
//
// When both admit, the Decision is the one closer to exhaustion (fewer
// Remaining; on a tie the longer Reset), as the RateLimit header draft
// asks when several policies apply.
func (l *Limiter[K]) Allow(key K, p Policy, now time.Time) Decision {
	if p.Rate.interval == 0 && p.Quota.per == 0 {
		return Decision{Allowed: true}
	}
	ns := now.UnixNano()
	e := l.entry(key, ns)
	var dr Decision
	if p.Rate.interval != 0 {
		dr = e.rate.allow(p.Rate, ns)
		if !dr.Allowed || p.Quota.per == 0 {
			return dr
		}
	}
	dq := e.quota.allow(p.Quota, ns, true)
	if !dq.Allowed || p.Rate.interval == 0 {
		return dq
	}
	if dr.Remaining < dq.Remaining || (dr.Remaining == dq.Remaining && dr.Reset > dq.Reset) {
		return dr
	}
	return dq
}

// QuotaCell returns key's quota state (created as Allow would), for
// charging an answer's rows and bytes as it streams (QuotaCell.Take). A
// cell evicted meanwhile is charged unseen, as for Allow's race.
func (l *Limiter[K]) QuotaCell(key K, now time.Time) *QuotaCell {
	return &l.entry(key, now.UnixNano()).quota
}

// Len returns the number of keys held, at most Capacity.
func (l *Limiter[K]) Len() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	return n
}

// Stats counts evictions since New.
type Stats struct {
	// Evictions is every key removed to make room for a new one.
	Evictions uint64
	// EvictedBusy is the part of Evictions whose state was not idle: a
	// burst or a quota count was forgiven. Steadily above zero means
	// Capacity is too small for the busy keys.
	EvictedBusy uint64
}

// Stats returns the eviction counts.
func (l *Limiter[K]) Stats() Stats {
	return Stats{Evictions: l.evictions.Load(), EvictedBusy: l.evictedBusy.Load()}
}

// entry returns key's state, creating it (and evicting another key if the
// shard is full) when absent.
func (l *Limiter[K]) entry(key K, now int64) *entry {
	sh := &l.shards[maphash.Comparable(l.seed, key)&l.mask]
	sh.mu.RLock()
	e := sh.m[key]
	sh.mu.RUnlock()
	if e != nil {
		return e
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e = sh.m[key]; e != nil {
		return e
	}
	if len(sh.m) >= sh.cap {
		l.evictLocked(sh, now)
	}
	e = new(entry)
	sh.m[key] = e
	return e
}

// evictLocked removes one entry of the full shard sh; see Limiter.
func (l *Limiter[K]) evictLocked(sh *shard[K], now int64) {
	var victim K
	found := false
	best := int64(1<<63 - 1)
	seen := 0
	for k, e := range sh.m {
		if e.idle(now) {
			victim, found, best = k, true, -1
			break
		}
		if r := e.rank(); !found || r < best {
			victim, found, best = k, true, r
		}
		if seen++; seen >= evictionSample {
			break
		}
	}
	if !found {
		return
	}
	delete(sh.m, victim)
	l.evictions.Add(1)
	if best >= 0 {
		l.evictedBusy.Add(1)
	}
}

func (e *entry) idle(now int64) bool { return e.rate.idle(now) && e.quota.idle(now) }

// rank is when the entry becomes idle if nothing else happens.
func (e *entry) rank() int64 { return max(e.rate.rank(), e.quota.rank()) }
