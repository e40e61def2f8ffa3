package discovery

import (
	"hash/maphash"
	"sync"
)

// DefaultDedupeCapacity is a Deduper's capacity when none is given.
const DefaultDedupeCapacity = 1024

// Problem is one distinct data problem, as a log line would describe it.
type Problem struct {
	Upstream string
	Address  string // or the Rejection's Key when the address is unknown
	Reason   Reason
	Raw      string
}

// Deduper answers "is this the first time we see this Problem?" so that a
// source logs each distinct problem once, not once per poll. Memory is
// bounded: it remembers at most Capacity problems.
//
// It keeps two generations of 64-bit seeded hashes (hash/maphash, a random
// seed per Deduper, so collisions cannot be forced from outside). A lookup
// checks both; a hit in the old generation moves the entry to the new one.
// When the new generation holds Capacity/2 entries, the old one is dropped
// and the new one becomes old. This approximates LRU at O(1) per call with
// no list: a problem seen at least once every Capacity/2 distinct problems
// is never forgotten, one unseen for longer is forgotten and logged again
// when it recurs.
//
// Trade-offs, chosen over exact LRU and over clear-on-full: clear-on-full
// would re-log every live problem at once each time it fills; exact LRU costs
// a list node per entry for little gain. With more than Capacity/2 distinct
// problems recurring every poll, every problem is logged on every poll (any
// bounded scheme degrades so; the metric counts them regardless). A hash
// collision (odds about n²/2⁶⁴) makes a new problem look seen: one log line
// lost, never a count. A problem that is fixed and later recurs is not logged
// again while it is remembered.
//
// The zero value is ready to use with DefaultDedupeCapacity. Safe for
// concurrent use.
type Deduper struct {
	capacity int
	mu       struct {
		sync.Mutex
		seed     maphash.Seed
		seeded   bool
		cur, old map[uint64]struct{}
	}
}

// NewDeduper returns a Deduper remembering at most capacity problems;
// capacity ≤ 1 means DefaultDedupeCapacity.
func NewDeduper(capacity int) *Deduper {
	return &Deduper{capacity: capacity}
}

// First reports whether p is new: true the first time, false while p is
// remembered.
func (d *Deduper) First(p Problem) bool {
	half := d.capacity / 2
	if d.capacity <= 1 {
		half = DefaultDedupeCapacity / 2
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.mu.seeded {
		d.mu.seed, d.mu.seeded = maphash.MakeSeed(), true
	}
	h := maphash.Comparable(d.mu.seed, p)
	if _, ok := d.mu.cur[h]; ok {
		return false
	}
	_, seen := d.mu.old[h]
	if seen {
		delete(d.mu.old, h)
	}
	if len(d.mu.cur) >= half {
		d.mu.old, d.mu.cur = d.mu.cur, make(map[uint64]struct{}, half)
	}
	if d.mu.cur == nil {
		d.mu.cur = make(map[uint64]struct{})
	}
	d.mu.cur[h] = struct{}{}
	return !seen
}

// Len returns how many problems are remembered (at most the capacity).
func (d *Deduper) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.mu.cur) + len(d.mu.old)
}
