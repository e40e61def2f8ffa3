package datacache

import (
	"container/list"
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func benchCache(b *testing.B, keys int) (*Cache, []string) {
	c := newCache(b, Options{MaxBytes: 64 << 20})
	names := make([]string, keys)
	body := strings.Repeat("x", 4096)
	for i := range names {
		names[i] = "orders-v1|json|customer_id=" + strconv.Itoa(i) + "|cursor="
		fill(b, c, names[i], pol, t0, body)
	}
	return c, names
}

// BenchmarkGetHit is one fresh hit.
func BenchmarkGetHit(b *testing.B) {
	c, keys := benchCache(b, 1)
	b.ReportAllocs()
	for b.Loop() {
		if c.Get(keys[0], pol, t0).Status != Hit {
			b.Fatal("miss")
		}
	}
}

// BenchmarkBeginHit is the data route's path on a hit.
func BenchmarkBeginHit(b *testing.B) {
	c, keys := benchCache(b, 1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r, _ := c.Begin(ctx, keys[0], pol, t0); r.Status != Hit {
			b.Fatal("miss")
		}
	}
}

// BenchmarkBeginHitParallelOneKey: every goroutine hits the same key (one
// hot route and parameter set).
func BenchmarkBeginHitParallelOneKey(b *testing.B) {
	c, keys := benchCache(b, 1)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r, _ := c.Begin(ctx, keys[0], pol, t0); r.Status != Hit {
				b.Fatal("miss")
			}
		}
	})
}

// BenchmarkBeginHitParallelManyKeys: goroutines hit 1024 keys in turn.
func BenchmarkBeginHitParallelManyKeys(b *testing.B) {
	c, keys := benchCache(b, 1024)
	ctx := context.Background()
	var id atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(id.Add(1)) * 97
		for pb.Next() {
			i++
			if r, _ := c.Begin(ctx, keys[i%len(keys)], pol, t0); r.Status != Hit {
				b.Fatal("miss")
			}
		}
	})
}

// BenchmarkMissCommit is a leader's whole flight for a 4 KiB answer in a
// full cache: Begin, Write, Commit (which evicts one entry).
func BenchmarkMissCommit(b *testing.B) {
	c := newCache(b, Options{MaxBytes: 1 << 20})
	body := []byte(strings.Repeat("x", 4096))
	ctx := context.Background()
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "orders-v1|json|customer_id=" + strconv.Itoa(i)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		r, _ := c.Begin(ctx, keys[i%len(keys)], pol, t0.Add(pol.TTL*2))
		if r.Flight == nil {
			b.Fatal("hit")
		}
		r.Flight.Write(body)
		r.Flight.Commit("application/json", t0.Add(pol.TTL*2))
	}
}

// mutexLRU is the reference the benchmarks below compare with: the
// textbook LRU, a map and a list under one mutex, the hit moving its entry
// to the front. Every hit takes the mutex, so parallel readers serialise.
type mutexLRU struct {
	mu sync.Mutex
	m  map[string]*list.Element
	l  *list.List
}

func (c *mutexLRU) get(k string) *Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return nil
	}
	c.l.MoveToFront(e)
	return e.Value.(*Entry)
}

func benchMutexLRU(keys int) (*mutexLRU, []string) {
	c := &mutexLRU{m: map[string]*list.Element{}, l: list.New()}
	names := make([]string, keys)
	for i := range names {
		names[i] = "orders-v1|json|customer_id=" + strconv.Itoa(i) + "|cursor="
		c.m[names[i]] = c.l.PushFront(&Entry{Body: make([]byte, 4096)})
	}
	return c, names
}

// BenchmarkReferenceMutexLRUParallelOneKey: the reference on one hot key.
func BenchmarkReferenceMutexLRUParallelOneKey(b *testing.B) {
	c, keys := benchMutexLRU(1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if c.get(keys[0]) == nil {
				b.Fatal("miss")
			}
		}
	})
}

// BenchmarkReferenceMutexLRUParallelManyKeys: the reference on 1024 keys.
func BenchmarkReferenceMutexLRUParallelManyKeys(b *testing.B) {
	c, keys := benchMutexLRU(1024)
	var id atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(id.Add(1)) * 97
		for pb.Next() {
			i++
			if c.get(keys[i%len(keys)]) == nil {
				b.Fatal("miss")
			}
		}
	})
}
