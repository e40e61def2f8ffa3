package ratelimit

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

func mustLimiter[K comparable](t testing.TB, capacity int) *Limiter[K] {
	t.Helper()
	l, err := New[K](Options{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNewRejectsBadCapacity(t *testing.T) {
	for _, c := range []int{0, -1, maxCapacity + 1} {
		if _, err := New[string](Options{Capacity: c}); err == nil {
			t.Errorf("capacity %d accepted", c)
		}
	}
}

func TestZeroPolicyAdmits(t *testing.T) {
	l := mustLimiter[string](t, 10)
	if d := l.Allow("a", Policy{}, t0); !d.Allowed {
		t.Fatalf("%+v", d)
	}
	if l.Len() != 0 {
		t.Fatal("the zero policy created state")
	}
}

// TestRateRefusalKeepsQuota: a request the rate limit refuses consumes no
// quota; a request the quota refuses keeps its rate token.
func TestRateRefusalKeepsQuota(t *testing.T) {
	l := mustLimiter[string](t, 10)
	p := Policy{Rate: mustRate(t, 1, 2), Quota: mustQuota(t, 3, time.Hour)}
	for i := range 10 { // 2 pass, 8 refused by the rate limit
		d := l.Allow("a", p, t0)
		if d.Allowed != (i < 2) {
			t.Fatalf("request %d: %+v", i, d)
		}
		if !d.Allowed && d.RetryAfter != time.Second {
			t.Fatalf("request %d refused, but not by the rate limit: %+v", i, d)
		}
	}
	// The quota has one left: the 8 refusals did not use it.
	if d := l.Allow("a", p, at(time.Second)); !d.Allowed || d.Limit != 3 || d.Remaining != 0 {
		t.Fatalf("third: %+v", d)
	}
	// Quota exhausted: refused until the hour ends, and the rate token is
	// kept, so the next second's request is refused by the rate limit.
	d := l.Allow("a", p, at(2*time.Second))
	if end := t0.Truncate(time.Hour).Add(time.Hour); d.Allowed || d.Limit != 3 || d.RetryAfter != end.Sub(at(2*time.Second)) {
		t.Fatalf("fourth (quota): %+v", d)
	}
	if d = l.Allow("a", p, at(2*time.Second)); d.Allowed || d.Limit != 2 {
		t.Fatalf("fifth (rate, token not refunded): %+v", d)
	}
}

// TestAllowReportsClosestPolicy: with both admitting, the headers describe
// the policy with fewer requests left.
func TestAllowReportsClosestPolicy(t *testing.T) {
	l := mustLimiter[string](t, 10)
	p := Policy{Rate: mustRate(t, 10, 50), Quota: mustQuota(t, 1000, time.Hour)}
	if d := l.Allow("a", p, t0); d.Limit != 50 || d.Remaining != 49 {
		t.Fatalf("rate is closer: %+v", d)
	}
	p.Quota = mustQuota(t, 5, time.Hour)
	if d := l.Allow("b", p, t0); d.Limit != 5 || d.Remaining != 4 {
		t.Fatalf("quota is closer: %+v", d)
	}
}

// TestEvictionPrefersIdleKeys: in a full limiter, a new key evicts an idle
// key (TAT in the past), not a busy one, and a busy key keeps its state.
func TestEvictionPrefersIdleKeys(t *testing.T) {
	l := mustLimiter[string](t, 8) // one shard of 8
	r := mustRate(t, 1, 1)
	// Busy key: its one-request burst is used, TAT = t0+1h+1s.
	for i := range 7 {
		l.Allow(fmt.Sprint("idle", i), Policy{Rate: r}, t0)
	}
	busy := at(time.Hour)
	l.Allow("busy", Policy{Rate: r}, busy)
	for i := range 100 {
		l.Allow(fmt.Sprint("new", i), Policy{Rate: r}, busy)
	}
	if l.Len() != 8 {
		t.Fatalf("len %d, want 8", l.Len())
	}
	st := l.Stats()
	if st.Evictions != 100 {
		t.Fatalf("evictions %d, want 100", st.Evictions)
	}
	// The 7 idle keys went first, then keys made busy by this loop.
	if d := l.Allow("busy", Policy{Rate: r}, busy); d.Allowed && st.EvictedBusy < 93 {
		t.Fatalf("busy key lost its state while idle keys remained: %+v, %+v", d, st)
	}
	if st.EvictedBusy > 93 {
		t.Fatalf("%d busy evictions, want at most 93 (7 idle keys were there)", st.EvictedBusy)
	}
}

// TestMillionDistinctKeysStayBounded: a million distinct client addresses
// (200,000 under the race detector)
// (each making one request) keep the limiter at its capacity and the heap
// within a generous bound.
func TestMillionDistinctKeysStayBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a million keys")
	}
	const capacity = 10_000
	keys := 1_000_000
	if raceEnabled {
		keys = 200_000 // the race detector makes each map operation ~30x slower
	}
	l := mustLimiter[netip.Addr](t, capacity)
	r := mustRate(t, 10, 20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keys {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		l.Allow(a, Policy{Rate: r}, at(time.Duration(i)*time.Microsecond))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := l.Len(); n > capacity {
		t.Fatalf("%d keys held, capacity %d", n, capacity)
	}
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("keys %d, evictions %+v, heap growth %d KiB (%.0f B/key)", l.Len(), l.Stats(), growth/1024, float64(growth)/capacity)
	if growth > 16<<20 { // ~1.7 KiB per held key: an order of magnitude of slack
		t.Fatalf("heap grew by %d bytes for %d keys", growth, capacity)
	}
	runtime.KeepAlive(l)
}

// TestStringKeysStayBounded: the same with string keys, under a frozen
// clock so no key is ever idle and every eviction is of a busy key.
func TestStringKeysStayBounded(t *testing.T) {
	l := mustLimiter[string](t, 1000)
	r := mustRate(t, 1, 5)
	for i := range 50_000 {
		l.Allow(fmt.Sprint("app-", i), Policy{Rate: r, Quota: mustQuota(t, 10, time.Hour)}, t0)
	}
	if l.Len() > 1000 {
		t.Fatalf("%d keys held", l.Len())
	}
	if st := l.Stats(); st.Evictions != 49_000 || st.EvictedBusy != 49_000 {
		t.Fatalf("%+v", st)
	}
}

func TestHitPathDoesNotAllocate(t *testing.T) {
	l := mustLimiter[string](t, 1000)
	la := mustLimiter[netip.Addr](t, 1000)
	p := Policy{Rate: mustRate(t, 1e6, 10), Quota: mustQuota(t, 1e9, time.Hour)}
	key, addr := "app-42", netip.MustParseAddr("2001:db8::1")
	l.Allow(key, p, t0)
	la.Allow(addr, p, t0)
	if n := testing.AllocsPerRun(1000, func() { l.Allow(key, p, t0) }); n != 0 {
		t.Errorf("string key: %v allocs", n)
	}
	if n := testing.AllocsPerRun(1000, func() { la.Allow(addr, p, t0) }); n != 0 {
		t.Errorf("netip.Addr key: %v allocs", n)
	}
}
