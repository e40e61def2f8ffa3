package route

import (
	"slices"
	"strings"
	"sync"
)

// mismatch collects, during one lookup, the methods of the rules whose
// path and conditions held but whose methods did not admit the request's.
// It lives on the lookup's stack; only more than len(buf) methods spill
// to the heap.
type mismatch struct {
	n    int
	buf  [16]string
	more []string
}

func (m *mismatch) add(methods []string) {
	for _, x := range methods {
		if m.n < len(m.buf) {
			m.buf[m.n] = x
		} else {
			m.more = append(m.more, x)
		}
		m.n++
	}
}

// maxAllowCache bounds the distinct Allow values a table keeps; past it a
// new value is built on each mismatch (and not kept).
const maxAllowCache = 1024

// allowCache maps an Allow value to the one-element slice callers put into
// a header, so that a repeated 405 allocates nothing. Bounded by
// maxAllowCache entries, never evicted (the values come from the table's
// own method lists, so a table has few).
type allowCache struct {
	mu sync.RWMutex
	m  map[string][]string
}

func newAllowCache() *allowCache { return &allowCache{m: make(map[string][]string)} }

// get returns the Allow slice of mm's methods: sorted, distinct, joined
// with ", ".
func (c *allowCache) get(mm *mismatch) []string {
	var ms []string
	if mm.n <= len(mm.buf) {
		ms = mm.buf[:mm.n]
	} else {
		ms = append(mm.buf[:], mm.more...)
	}
	slices.Sort(ms)
	ms = slices.Compact(ms)
	var stack [256]byte
	key := stack[:0]
	for i, m := range ms {
		if i > 0 {
			key = append(key, ", "...)
		}
		key = append(key, m...)
	}
	c.mu.RLock()
	v, ok := c.m[string(key)]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = []string{strings.Join(ms, ", ")}
	c.mu.Lock()
	if len(c.m) < maxAllowCache {
		c.m[v[0]] = v
	}
	c.mu.Unlock()
	return v
}
