package ratelimit

import (
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/limits"
)

// benchPolicy admits almost everything, so benchmarks measure the admitting
// path (the CAS), not early refusals.
func benchPolicy(b *testing.B) Policy {
	return Policy{Rate: mustRate(b, 1e9, maxBurst)}
}

// BenchmarkCellAllow is one GCRA decision on a bare cell.
func BenchmarkCellAllow(b *testing.B) {
	r := mustRate(b, 1e9, maxBurst)
	var c Cell
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		c.Allow(r, now)
	}
}

// BenchmarkLimiterAllow is one decision for a key already held (the hit
// path: lookup + CAS).
func BenchmarkLimiterAllow(b *testing.B) {
	l := mustLimiter[string](b, 1000)
	p := benchPolicy(b)
	l.Allow("app-1", p, t0)
	b.ReportAllocs()
	for b.Loop() {
		l.Allow("app-1", p, t0)
	}
}

// BenchmarkLimiterAllowWithQuota adds a quota to the same key.
func BenchmarkLimiterAllowWithQuota(b *testing.B) {
	l := mustLimiter[string](b, 1000)
	p := benchPolicy(b)
	p.Quota = mustQuota(b, limits.MaxQuotaRequests, 24*time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		l.Allow("app-1", p, t0)
	}
}

// BenchmarkLimiterAllowParallel: every goroutine on its own key.
func BenchmarkLimiterAllowParallel(b *testing.B) {
	l := mustLimiter[string](b, 100_000)
	p := benchPolicy(b)
	var id atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := "app-" + strconv.FormatInt(id.Add(1), 10)
		for pb.Next() {
			l.Allow(key, p, t0)
		}
	})
}

// BenchmarkLimiterAllowParallelOneKey: every goroutine on the same key,
// the CAS's worst case.
func BenchmarkLimiterAllowParallelOneKey(b *testing.B) {
	l := mustLimiter[string](b, 1000)
	p := benchPolicy(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Allow("app-1", p, t0)
		}
	})
}

// BenchmarkLimiter100kKeys cycles over 100,000 held keys (cache misses,
// no eviction).
func BenchmarkLimiter100kKeys(b *testing.B) {
	const n = 100_000
	l := mustLimiter[string](b, n)
	p := benchPolicy(b)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "app-" + strconv.Itoa(i)
		l.Allow(keys[i], p, t0)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Allow(keys[i], p, t0)
		if i++; i == n {
			i = 0
		}
	}
}

// BenchmarkLimiterNewKeysEvicting: every request a new client address in a
// full limiter (insertion + eviction).
func BenchmarkLimiterNewKeysEvicting(b *testing.B) {
	l := mustLimiter[netip.Addr](b, 10_000)
	p := Policy{Rate: mustRate(b, 10, 20)}
	b.ReportAllocs()
	i := uint32(0)
	for b.Loop() {
		i++
		a := netip.AddrFrom4([4]byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
		l.Allow(a, p, t0.Add(time.Duration(i)))
	}
}
