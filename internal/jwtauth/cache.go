package jwtauth

import (
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// The verification cache (issue 26, "Speed"). A cold RS256 verification
// costs ~70-90 µs of CPU, ES256 ~100-115 µs; a token is usually sent many
// times in its life, so the result of a full, successful Verify is kept,
// keyed by the SHA-256 of the whole token (a [32]byte: the token text is
// not retained). A hit still checks exp and nbf, with the clock skew,
// against now, so a cached token never outlives its exp; and it looks the
// token's kid up in the key set again and uses the entry only when the
// key set still answers the very key that verified it (the same
// *jose.JSONWebKey): a key removed from the JWKS, or any refetch of the
// set, makes the entry unusable and the token is verified afresh. Only a
// token that passed every check is inserted, so garbage never evicts a
// good entry and costs only the work it already cost.
//
// Bounds: at most MaxEntries entries (spread over cacheShards shards of
// MaxEntries/cacheShards each); an entry lives at most
// min(exp+skew, inserted+MaxTTL) (past exp+skew, as the JOSE
// library's own check). A full shard evicts one entry chosen by
// Go's randomised map iteration (O(1) expected): random eviction keeps the
// hot tokens with high probability and needs no list per entry.

// Cache defaults: DefaultCacheEntries per issuer; DefaultCacheTTL bounds
// how long a cached token stays accepted after a change that the key
// lookup on a hit does not see (there is none today: the hit re-checks the
// key; the TTL is a second line that also bounds memory held by idle
// entries).
const (
	DefaultCacheEntries = 10000
	DefaultCacheTTL     = 5 * time.Minute
	cacheShards         = 16
)

// CacheOptions configure an issuer's verification cache. MaxEntries 0
// disables it.
type CacheOptions struct {
	MaxEntries int
	MaxTTL     time.Duration
}

type cacheEntry struct {
	id       Identity
	kid      string
	key      *jose.JSONWebKey
	exp, nbf time.Time // nbf zero: none
	until    time.Time // inserted + MaxTTL
}

type cacheShard struct {
	mu sync.Mutex
	m  map[[32]byte]*cacheEntry
}

// verifyCache is safe for concurrent use.
type verifyCache struct {
	perShard     int
	ttl          time.Duration
	shards       [cacheShards]cacheShard
	hits, misses atomic.Uint64
}

func newVerifyCache(o CacheOptions) *verifyCache {
	if o.MaxEntries <= 0 {
		return nil
	}
	if o.MaxTTL <= 0 {
		o.MaxTTL = DefaultCacheTTL
	}
	per := (o.MaxEntries + cacheShards - 1) / cacheShards
	c := &verifyCache{perShard: per, ttl: o.MaxTTL}
	for i := range c.shards {
		c.shards[i].m = make(map[[32]byte]*cacheEntry)
	}
	return c
}

func (c *verifyCache) shard(h *[32]byte) *cacheShard { return &c.shards[h[0]%cacheShards] }

// get returns the entry for h when it is still within its lifetime at
// now (skew allowed on exp and nbf); a dead entry is removed.
func (c *verifyCache) get(h *[32]byte, now time.Time, skew time.Duration) *cacheEntry {
	s := c.shard(h)
	s.mu.Lock()
	e := s.m[*h]
	if e != nil && (now.After(e.exp.Add(skew)) || !now.Before(e.until)) {
		delete(s.m, *h)
		e = nil
	}
	s.mu.Unlock()
	if e != nil && !e.nbf.IsZero() && now.Before(e.nbf.Add(-skew)) {
		return nil // not yet valid: answered by a full Verify
	}
	return e
}

func (c *verifyCache) put(h *[32]byte, e *cacheEntry) {
	s := c.shard(h)
	s.mu.Lock()
	if _, ok := s.m[*h]; !ok && len(s.m) >= c.perShard {
		for k := range s.m { // random victim (map iteration order)
			delete(s.m, k)
			break
		}
	}
	s.m[*h] = e
	s.mu.Unlock()
}

func (c *verifyCache) remove(h *[32]byte) {
	s := c.shard(h)
	s.mu.Lock()
	delete(s.m, *h)
	s.mu.Unlock()
}

// Len is the number of entries (tests).
func (c *verifyCache) Len() int {
	n := 0
	for i := range c.shards {
		c.shards[i].mu.Lock()
		n += len(c.shards[i].m)
		c.shards[i].mu.Unlock()
	}
	return n
}

// CacheStats returns the cache's hits and misses (0, 0 when it is off).
func (is *Issuer) CacheStats() (hits, misses uint64) {
	if is.cache == nil {
		return 0, 0
	}
	return is.cache.hits.Load(), is.cache.misses.Load()
}

// cached answers token from the cache; ok false: verify it in full.
func (is *Issuer) cached(ctx context.Context, h *[32]byte, now time.Time) (Identity, bool) {
	e := is.cache.get(h, now, is.ClockSkew)
	if e == nil {
		is.cache.misses.Add(1)
		return Identity{}, false
	}
	if key, have := is.Keys.Lookup(ctx, e.kid); !have || key != e.key {
		is.cache.remove(h) // the key that verified it is gone or replaced
		is.cache.misses.Add(1)
		return Identity{}, false
	}
	is.cache.hits.Add(1)
	return e.id, true
}

func tokenHash(token string) (h [32]byte) { return sha256.Sum256([]byte(token)) }
