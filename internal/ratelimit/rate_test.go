package ratelimit

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// t0 is an arbitrary instant well after 1970, on a whole second.
var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func mustRate(t testing.TB, perSecond float64, burst int64) Rate {
	t.Helper()
	r, err := NewRate(perSecond, burst)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewRateRejectsBadOptions(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		burst int64
	}{
		{0, 1}, {-1, 1}, {2e9, 1}, {1e-7, 1}, {1, 0}, {1, -3}, {1, maxBurst + 1},
		{1e-6, 1001}, {1e-3, 1_000_001}, // burst × interval above limits.MaxBurstWindow
		{math.NaN(), 1}, {math.Inf(1), 1},
	} {
		if _, err := NewRate(c.rate, c.burst); err == nil {
			t.Errorf("NewRate(%v, %d) accepted", c.rate, c.burst)
		}
	}
	r := mustRate(t, 4, 10)
	if r.Interval() != 250*time.Millisecond || r.Burst() != 10 {
		t.Fatalf("NewRate(4, 10) = interval %v burst %d", r.Interval(), r.Burst())
	}
}

// TestGCRASteps is a step table at explicit instants: 1 request/s, burst 3.
func TestGCRASteps(t *testing.T) {
	r := mustRate(t, 1, 3)
	var c Cell
	s := time.Second
	steps := []struct {
		at   time.Duration
		want Decision
	}{
		{0, Decision{Allowed: true, Limit: 3, Remaining: 2, Reset: 1 * s}},
		{0, Decision{Allowed: true, Limit: 3, Remaining: 1, Reset: 2 * s}},
		{0, Decision{Allowed: true, Limit: 3, Remaining: 0, Reset: 3 * s}},
		// Empty: the next request fits at TAT+T−L = 1s.
		{0, Decision{Limit: 3, Remaining: 0, Reset: 3 * s, RetryAfter: 1 * s}},
		{s - 1, Decision{Limit: 3, Remaining: 0, Reset: 2*s + 1, RetryAfter: 1}},
		{s, Decision{Allowed: true, Limit: 3, Remaining: 0, Reset: 3 * s}},
		// Half an interval later: still refused, RetryAfter to the ns.
		{s + 500*time.Millisecond, Decision{Limit: 3, Remaining: 0, Reset: 2*s + 500*time.Millisecond, RetryAfter: 500 * time.Millisecond}},
		// Long idle: a full burst again, as if fresh.
		{time.Hour, Decision{Allowed: true, Limit: 3, Remaining: 2, Reset: 1 * s}},
	}
	for i, st := range steps {
		if got := c.Allow(r, at(st.at)); got != st.want {
			t.Fatalf("step %d at +%v: got %+v, want %+v", i, st.at, got, st.want)
		}
	}
}

// TestRemainingAfterK checks Remaining and Reset after k requests at one
// instant, for every k up to and past the burst.
func TestRemainingAfterK(t *testing.T) {
	r := mustRate(t, 10, 20) // T = 100ms
	var c Cell
	for k := int64(1); k <= 25; k++ {
		d := c.Allow(r, t0)
		if k <= 20 {
			if !d.Allowed || d.Remaining != 20-k || d.Reset != time.Duration(k)*100*time.Millisecond {
				t.Fatalf("request %d: %+v", k, d)
			}
			continue
		}
		if d.Allowed || d.RetryAfter != 100*time.Millisecond || d.Reset != 2*time.Second {
			t.Fatalf("request %d past the burst: %+v", k, d)
		}
	}
}

// TestRetryAfterIsExact: a refused request's RetryAfter is the first
// instant another is admitted, to the nanosecond.
func TestRetryAfterIsExact(t *testing.T) {
	r := mustRate(t, 3, 2) // T = 333333333ns
	var c Cell
	c.Allow(r, t0)
	c.Allow(r, t0)
	now := at(10 * time.Millisecond)
	d := c.Allow(r, now)
	if d.Allowed {
		t.Fatal("third request admitted")
	}
	if c.Peek(r, now.Add(d.RetryAfter-1)).Allowed {
		t.Fatalf("admitted 1ns before RetryAfter %v", d.RetryAfter)
	}
	if !c.Allow(r, now.Add(d.RetryAfter)).Allowed {
		t.Fatalf("refused at RetryAfter %v", d.RetryAfter)
	}
	if d.RetryAfter != 333333333*time.Nanosecond-10*time.Millisecond {
		t.Fatalf("RetryAfter = %v", d.RetryAfter)
	}
}

func TestZeroRateRefuses(t *testing.T) {
	var c Cell
	if d := c.Allow(Rate{}, t0); d.Allowed {
		t.Fatalf("zero Rate admitted: %+v", d)
	}
}

// TestGCRAConcurrentExact: goroutines × requests against burst B at a
// frozen instant admit exactly B, on a bare Cell and through a Limiter.
func TestGCRAConcurrentExact(t *testing.T) {
	const goroutines, each, burst = 8, 500, 100
	r := mustRate(t, 1, burst)
	l, err := New[string](Options{Capacity: 16})
	if err != nil {
		t.Fatal(err)
	}
	var c Cell
	for name, allow := range map[string]func() bool{
		"cell":    func() bool { return c.Allow(r, t0).Allowed },
		"limiter": func() bool { return l.Allow("app", Policy{Rate: r}, t0).Allowed },
	} {
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range each {
					if allow() {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if admitted.Load() != burst {
			t.Errorf("%s: %d admitted, want exactly %d", name, admitted.Load(), burst)
		}
	}
	if Contended() != 0 {
		t.Errorf("%d decisions hit the CAS bound", Contended())
	}
}

// TestNewRateAtTheBounds: the edges limits accepts make working policies
// (no overflow of b·T: the slowest rate with the largest burst it allows
// admits its burst and then refuses with a finite wait).
func TestNewRateAtTheBounds(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		burst int64
	}{
		{1e-6, 1000}, {1e9, maxBurst}, {1, maxBurst}, {0.5, 500_000_000},
	} {
		r, err := NewRate(c.rate, c.burst)
		if err != nil {
			t.Fatalf("NewRate(%v, %d): %v", c.rate, c.burst, err)
		}
		if r.limit <= 0 || r.limit/r.interval != c.burst {
			t.Fatalf("NewRate(%v, %d): L = %d, T = %d overflowed", c.rate, c.burst, r.limit, r.interval)
		}
		var cell Cell
		if d := cell.Allow(r, t0); !d.Allowed || d.Remaining != c.burst-1 {
			t.Errorf("NewRate(%v, %d): first request %+v", c.rate, c.burst, d)
		}
	}
}
