package auth

import (
	"encoding/binary"
	"testing"
	"time"
)

func macOf(i int) [32]byte {
	var m [32]byte
	binary.LittleEndian.PutUint64(m[:], uint64(i))
	return m
}

// TestNonceCacheBound: capacity + N distinct signatures keep the cache at
// capacity; the N oldest are evicted while live and counted.
func TestNonceCacheBound(t *testing.T) {
	const capacity, extra = 1000, 250
	c := newNonceCache(capacity, int64(10*time.Minute))
	now := exampleNow.UnixNano()
	for i := range capacity + extra {
		if !c.add(macOf(i), now+int64(i)) {
			t.Fatalf("signature %d refused as a replay", i)
		}
	}
	size, evicted := c.stats()
	if size != capacity || evicted != extra || len(c.mu.seen) != capacity {
		t.Fatalf("size %d (map %d), evicted %d; want %d, %d", size, len(c.mu.seen), evicted, capacity, extra)
	}
	// The newest are still refused; the evicted oldest would pass again.
	if c.add(macOf(capacity+extra-1), now+capacity+extra) {
		t.Fatal("a remembered signature was accepted twice")
	}
	if !c.add(macOf(0), now+capacity+extra) {
		t.Fatal("an evicted signature is still remembered")
	}
}

// TestNonceCacheExpiry: expired entries leave lazily, a few per insertion,
// and are not counted as evictions.
func TestNonceCacheExpiry(t *testing.T) {
	ttl := int64(time.Minute)
	c := newNonceCache(16, ttl)
	now := exampleNow.UnixNano()
	for i := range 16 {
		c.add(macOf(i), now)
	}
	if !c.add(macOf(0), now+ttl) {
		t.Fatal("an expired signature was refused")
	}
	size, evicted := c.stats()
	if evicted != 0 || size != 16-expireBatch+1 {
		t.Fatalf("size %d, evicted %d", size, evicted)
	}
	// The next insertion clears the 8 expired entries left; then 15 live
	// ones fit beside the re-added one, and the other 85 evict live ones.
	for i := range 100 {
		c.add(macOf(1000+i), now+ttl)
	}
	if _, evicted = c.stats(); evicted != 100-15 {
		t.Fatalf("evicted %d", evicted)
	}
}
