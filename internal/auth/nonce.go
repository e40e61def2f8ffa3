package auth

import "sync"

// expireBatch bounds how many expired signatures one insertion removes
// from the front of the cache: the work per call stays O(1), and entries
// not yet removed are found expired on lookup and overwritten when the
// cache is full.
const expireBatch = 8

// nonceCache remembers accepted signatures until they expire, in at most
// capacity entries: a map for lookup and a ring in insertion order (which
// is expiry order while now does not go backwards) for expiry and
// eviction. When full, the oldest entry goes, live or not; a live one is
// counted in evicted, and its request could then be replayed until its
// Date leaves the skew window. Only requests whose MAC verified are
// inserted, so only holders of a secret can fill the cache.
type nonceCache struct {
	ttl int64 // nanoseconds an accepted signature is remembered (2×skew)

	mu struct {
		sync.Mutex
		seen    map[[32]byte]int64 // signature → expiry, Unix ns
		ring    []nonce
		head, n int
		evicted uint64
	}
}

type nonce struct {
	mac     [32]byte
	expires int64
}

func newNonceCache(capacity int, ttl int64) *nonceCache {
	c := &nonceCache{ttl: ttl}
	c.mu.seen = make(map[[32]byte]int64, capacity)
	c.mu.ring = make([]nonce, capacity)
	return c
}

// add records mac as accepted at now and reports true, or reports false
// if it was accepted before and has not expired (a replay).
func (c *nonceCache) add(mac [32]byte, now int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range expireBatch {
		if c.mu.n == 0 || c.mu.ring[c.mu.head].expires > now {
			break
		}
		c.popLocked()
	}
	if exp, ok := c.mu.seen[mac]; ok && exp > now {
		return false
	}
	if c.mu.n == len(c.mu.ring) {
		if c.mu.ring[c.mu.head].expires > now {
			c.mu.evicted++
		}
		c.popLocked()
	}
	exp := now + c.ttl
	c.mu.ring[(c.mu.head+c.mu.n)%len(c.mu.ring)] = nonce{mac: mac, expires: exp}
	c.mu.n++
	c.mu.seen[mac] = exp
	return true
}

// popLocked removes the oldest entry; its map entry goes only if it was
// not re-added since (an expired signature accepted again).
func (c *nonceCache) popLocked() {
	old := &c.mu.ring[c.mu.head]
	if c.mu.seen[old.mac] == old.expires {
		delete(c.mu.seen, old.mac)
	}
	c.mu.head = (c.mu.head + 1) % len(c.mu.ring)
	c.mu.n--
}

func (c *nonceCache) stats() (size int, evicted uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.n, c.mu.evicted
}
