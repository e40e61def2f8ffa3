package fwdauth

import (
	"sync"
	"time"
)

// DefaultCacheEntries bounds a Checker's cache when Options.CacheEntries
// is 0.
const DefaultCacheEntries = 10000

// cache holds decisions by credentials digest for ttl, at most max
// entries: a put into a full cache first drops the expired entries (a
// sweep of at most max), then, if still full, the oldest by insertion
// (a ring of the keys in insertion order).
type cache struct {
	mu   sync.Mutex
	max  int
	ttl  time.Duration
	m    map[[32]byte]cacheEntry
	ring [][32]byte // insertion order, len <= max; next is the oldest slot
	next int
}

type cacheEntry struct {
	d       Decision
	expires time.Time
}

func newCache(max int, ttl time.Duration) *cache {
	return &cache{max: max, ttl: ttl, m: make(map[[32]byte]cacheEntry), ring: make([][32]byte, 0, min(max, 1024))}
}

func (c *cache) get(k [32]byte, now time.Time) (Decision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return Decision{}, false
	}
	if !now.Before(e.expires) {
		delete(c.m, k)
		return Decision{}, false
	}
	return e.d, true
}

func (c *cache) put(k [32]byte, d Decision, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		c.m[k] = cacheEntry{d: d, expires: now.Add(c.ttl)}
		return
	}
	if len(c.m) >= c.max {
		for key, e := range c.m { // bounded: at most max entries
			if !now.Before(e.expires) {
				delete(c.m, key)
			}
		}
	}
	if len(c.ring) < c.max {
		c.ring = append(c.ring, k)
	} else {
		// The slot's old key: evicted unless it was re-put or dropped.
		old := c.ring[c.next]
		delete(c.m, old)
		c.ring[c.next] = k
		c.next = (c.next + 1) % c.max
	}
	for len(c.m) >= c.max { // keys dropped as expired left the ring stale: make room
		for key := range c.m {
			delete(c.m, key)
			break
		}
	}
	c.m[k] = cacheEntry{d: d, expires: now.Add(c.ttl)}
}

// len is the entries held (tests).
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
