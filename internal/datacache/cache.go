package datacache

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxKeyBytes is the longest key that is cached; Begin answers Bypass for a
// longer one.
const MaxKeyBytes = 1024

// EntryOverhead is the fixed number of bytes charged to every entry on top
// of its body, content type and key: the node, the Entry and the index's
// share, rounded up, so that many tiny answers cannot exceed MaxBytes of
// real memory.
const EntryOverhead = 256

// Options bound a Cache. They are checked by New.
type Options struct {
	// MaxBytes bounds the sum of the entries' sizes (see the package doc).
	// Required: it must be positive.
	MaxBytes int64
	// MaxEntryBytes bounds one entry's size; a larger answer is never
	// stored, and a Flight stops buffering past it. Zero means MaxBytes;
	// it may not exceed MaxBytes.
	MaxEntryBytes int64
	// MaxEntries bounds the number of entries. Zero means no bound beyond
	// MaxBytes (which bounds it at MaxBytes/EntryOverhead anyway).
	MaxEntries int
}

// Policy is a route's cache policy; every call takes the route's current
// one, so a reload's new ttl applies to entries already kept.
type Policy struct {
	// TTL is how long an entry is served fresh (Hit) after it was stored.
	// Zero or negative means the route is not cached: Begin answers Bypass.
	TTL time.Duration
	// StaleIfError is how long after TTL an entry may still be served when
	// the source fails (Stale). Zero or negative means never.
	StaleIfError time.Duration
	// MaxWait bounds how long a follower waits for the leader's query
	// before running its own (Bypass), so that followers never wait out a
	// leader streaming a long answer to a slow client. Zero means the wait
	// is bounded only by the follower's context.
	MaxWait time.Duration
}

// window is how long after Stored an entry may be served at all.
func (p Policy) window() time.Duration { return p.TTL + max(p.StaleIfError, 0) }

// Entry is one complete encoded answer. It is immutable once stored: the
// cache and every request it is served to share Body, which nobody may
// modify.
type Entry struct {
	// Body is the whole answer as sent to the client.
	Body []byte
	// ContentType is the answer's Content-Type header value.
	ContentType string
	// Stored is when the answer was complete; its age is now − Stored.
	Stored time.Time
}

// Status says how a Begin, Get, Stale or Do was answered. Its String is the
// result label of levee_data_cache_total (hit, stale, shared, miss, bypass;
// none for a call that returned an error); Header is the Levee-Cache value.
type Status uint8

const (
	// None: no answer, the call returned an error or found nothing.
	None Status = iota
	// Hit: a fresh entry (age < TTL).
	Hit
	// Stale: an entry past its TTL but within StaleIfError, served because
	// the source failed.
	Stale
	// Shared: the entry another request's query just stored, waited for.
	Shared
	// Miss: this request leads the key's single flight and fills it.
	Miss
	// Bypass: this request runs its query alone (the route is not cached,
	// the key is too long for MaxKeyBytes or MaxEntryBytes, the leader
	// abandoned or overflowed, MaxWait passed).
	Bypass
)

var statusNames = [...]string{None: "none", Hit: "hit", Stale: "stale", Shared: "shared", Miss: "miss", Bypass: "bypass"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(" + fmt.Sprint(uint8(s)) + ")"
}

// Header is the value of the Levee-Cache response header: "hit" for an
// answer from the cache (Hit, and Shared: another request's query answered
// it, as a coalescing HTTP cache reports it), "stale" for Stale, "miss" for
// an answer this request's own query produced (Miss, Bypass), "" for None.
func (s Status) Header() string {
	switch s {
	case Hit, Shared:
		return "hit"
	case Stale:
		return "stale"
	case Miss, Bypass:
		return "miss"
	}
	return ""
}

// Result is the answer of Begin, Get, Stale and Do.
type Result struct {
	Status Status
	// Entry is the answer to serve for Hit, Stale and Shared (and Miss from
	// Do); nil otherwise.
	Entry *Entry
	// Age is now − Entry.Stored, never negative; zero without an entry.
	Age time.Duration
	// Flight is set for Miss and Bypass from Begin: the caller runs the
	// query and must end it with Commit or Abandon.
	Flight *Flight
}

// AgeSeconds is Age in whole seconds, rounded down, the value of the Age
// header (RFC 9111, 5.1).
func (r Result) AgeSeconds() int64 { return int64(r.Age / time.Second) }

// Stats is a snapshot of the cache's size and its cumulative counters.
// Per-route result counts are the caller's (from Result.Status): the cache
// does not know routes.
type Stats struct {
	Entries int
	Bytes   int64
	// Flights is the number of keys with a leader running; Waiting the
	// number of followers waiting on one.
	Flights int
	Waiting int64
	// Evictions counts entries dropped to make room; Expired those dropped
	// because they were past their stale window; TooLarge answers not
	// stored because they were over MaxEntryBytes.
	Evictions uint64
	Expired   uint64
	TooLarge  uint64
}

// Errors of Flight.Commit. Neither is the request's failure: the answer
// was sent, only not kept.
var (
	// ErrTooLarge: the answer was over MaxEntryBytes.
	ErrTooLarge = errors.New("datacache: answer over the cache's max entry bytes, not stored")
	// ErrNotCached: the flight's key or policy is not cached (Bypass for a
	// long key or a zero TTL).
	ErrNotCached = errors.New("datacache: key or policy not cached")
	// ErrFlightEnded: Commit after Commit or Abandon.
	ErrFlightEnded = errors.New("datacache: flight already ended")
)

// node is one stored entry on the eviction list.
type node struct {
	key   string
	entry *Entry
	size  int64
	// stored is Entry.Stored and until is stored + the window of the
	// policy it was stored with (past it the entry is dropped whatever the
	// policy of the lookup), both in Unix nanoseconds: integer compares on
	// the hit path instead of time.Time arithmetic.
	stored, until int64
	// referenced is set by hits and cleared by the eviction hand.
	referenced atomic.Bool

	// Guarded by Cache.mu.
	prev, next *node
	linked     bool
}

// Cache is the answer cache. Create it with New; it is safe for concurrent
// use.
type Cache struct {
	maxBytes, maxEntryBytes int64
	maxEntries              int

	// index maps key → *node. Loaded without a lock; stored and deleted
	// only under mu, so it always agrees with the list.
	index sync.Map

	waiting atomic.Int64

	mu struct {
		sync.Mutex
		head, tail *node // head newest
		entries    int
		bytes      int64
		flights    map[string]*flight
		evictions  uint64
		expired    uint64
		tooLarge   uint64
	}
}

// New returns an empty Cache bounded by opts.
func New(opts Options) (*Cache, error) {
	if opts.MaxBytes <= 0 {
		return nil, fmt.Errorf("datacache: max bytes must be positive, got %d", opts.MaxBytes)
	}
	if opts.MaxEntryBytes < 0 || opts.MaxEntryBytes > opts.MaxBytes {
		return nil, fmt.Errorf("datacache: max entry bytes must be between 0 and max bytes (%d), got %d", opts.MaxBytes, opts.MaxEntryBytes)
	}
	if opts.MaxEntries < 0 {
		return nil, fmt.Errorf("datacache: max entries must not be negative, got %d", opts.MaxEntries)
	}
	c := &Cache{maxBytes: opts.MaxBytes, maxEntryBytes: opts.MaxEntryBytes, maxEntries: opts.MaxEntries}
	if c.maxEntryBytes == 0 {
		c.maxEntryBytes = c.maxBytes
	}
	c.mu.flights = make(map[string]*flight)
	return c, nil
}

// cacheable reports whether key under pol is kept at all: the route is
// cached, the key is within MaxKeyBytes and leaves room for a body under
// MaxEntryBytes (so a leader never holds followers for an answer that
// could not be stored).
func (c *Cache) cacheable(key string, pol Policy) bool {
	return pol.TTL > 0 && len(key) <= MaxKeyBytes && int64(len(key))+EntryOverhead <= c.maxEntryBytes
}

// Get returns the fresh entry for key (Hit), or Status None. It never
// waits and takes no lock on a hit.
func (c *Cache) Get(key string, pol Policy, now time.Time) Result {
	if !c.cacheable(key, pol) {
		return Result{}
	}
	return c.lookup(key, pol.TTL, now, Hit)
}

// Stale returns the entry for key within TTL+StaleIfError: Hit when it is
// still fresh, Stale when past its TTL; Status None when there is none. The
// caller uses it to answer without a query when the source is known to be
// unavailable.
func (c *Cache) Stale(key string, pol Policy, now time.Time) Result {
	if !c.cacheable(key, pol) {
		return Result{}
	}
	r := c.lookup(key, pol.window(), now, Stale)
	if r.Status == Stale && r.Age < pol.TTL {
		r.Status = Hit
	}
	return r
}

// lookup finds key's entry younger than within at now, answered with
// status. An entry found past its stored window is dropped.
func (c *Cache) lookup(key string, within time.Duration, now time.Time, status Status) Result {
	v, ok := c.index.Load(key)
	if !ok {
		return Result{}
	}
	n := v.(*node)
	ns := now.UnixNano()
	if ns >= n.until {
		c.drop(n)
		return Result{}
	}
	age := n.age(ns)
	if age >= within {
		return Result{}
	}
	if !n.referenced.Load() {
		n.referenced.Store(true)
	}
	return Result{Status: status, Entry: n.entry, Age: age}
}

// age is how old n's entry is at ns, never negative.
func (n *node) age(ns int64) time.Duration { return time.Duration(max(ns-n.stored, 0)) }

// drop removes n, past its window, if it is still the key's node.
func (c *Cache) drop(n *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.linked {
		c.removeLocked(n)
		c.mu.expired++
	}
}

// Stats returns the current size and the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		Entries:   c.mu.entries,
		Bytes:     c.mu.bytes,
		Flights:   len(c.mu.flights),
		Waiting:   c.waiting.Load(),
		Evictions: c.mu.evictions,
		Expired:   c.mu.expired,
		TooLarge:  c.mu.tooLarge,
	}
}

// entrySize is what e under key is charged.
func entrySize(key string, e *Entry) int64 {
	return int64(len(e.Body)) + int64(len(e.ContentType)) + int64(len(key)) + EntryOverhead
}

// storeLocked keeps e under key, replacing the key's entry unless that one
// is newer (stored by a later query) and keepNewer is set, then evicts to
// the bounds. It returns ErrTooLarge when e is over MaxEntryBytes.
func (c *Cache) storeLocked(key string, e *Entry, pol Policy, keepNewer bool) error {
	size := entrySize(key, e)
	if size > c.maxEntryBytes {
		c.mu.tooLarge++
		return ErrTooLarge
	}
	if v, ok := c.index.Load(key); ok {
		old := v.(*node)
		if keepNewer && old.stored > e.Stored.UnixNano() {
			return nil
		}
		c.removeLocked(old)
	}
	n := &node{key: strings.Clone(key), entry: e, size: size, stored: e.Stored.UnixNano()}
	n.until = n.stored + int64(pol.window())
	c.pushHeadLocked(n)
	c.index.Store(n.key, n)
	c.mu.entries++
	c.mu.bytes += size
	c.evictLocked(n.stored)
	return nil
}

// evictLocked runs the second-chance hand from the tail until the cache is
// within its bounds. Each node is examined at most twice: once to clear
// its bit and move it to the head, once to evict it.
func (c *Cache) evictLocked(now int64) {
	for budget := 2 * c.mu.entries; budget > 0 && c.overLocked(); budget-- {
		n := c.mu.tail
		if n == nil {
			return
		}
		switch {
		case now >= n.until:
			c.removeLocked(n)
			c.mu.expired++
		case n.referenced.Load():
			n.referenced.Store(false)
			c.unlinkLocked(n)
			c.pushHeadLocked(n)
		default:
			c.removeLocked(n)
			c.mu.evictions++
		}
	}
	// The budget cannot run out while over: after one pass every bit is
	// clear. This loop is the guarantee, not the expected path.
	for c.overLocked() && c.mu.tail != nil {
		c.removeLocked(c.mu.tail)
		c.mu.evictions++
	}
}

func (c *Cache) overLocked() bool {
	return c.mu.bytes > c.maxBytes || (c.maxEntries > 0 && c.mu.entries > c.maxEntries)
}

func (c *Cache) removeLocked(n *node) {
	c.unlinkLocked(n)
	c.index.CompareAndDelete(n.key, n)
	c.mu.entries--
	c.mu.bytes -= n.size
}

func (c *Cache) pushHeadLocked(n *node) {
	n.prev, n.next = nil, c.mu.head
	if c.mu.head != nil {
		c.mu.head.prev = n
	} else {
		c.mu.tail = n
	}
	c.mu.head = n
	n.linked = true
}

func (c *Cache) unlinkLocked(n *node) {
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		c.mu.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		c.mu.tail = n.prev
	}
	n.prev, n.next = nil, nil
	n.linked = false
}
