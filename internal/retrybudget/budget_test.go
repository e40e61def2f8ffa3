package retrybudget

import (
	"sync"
	"testing"
	"time"
)

func mustNew(t *testing.T, o Options) *Budget {
	t.Helper()
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Ratio: -0.1, Window: time.Second},
		{Ratio: 1.5, Window: time.Second},
		{Ratio: 0.2, MinPerSecond: -1, Window: time.Second},
		{Ratio: 0.2, Window: 0},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestBudgetSteps is a step table at explicit times: ratio 0.2, allowance
// 1/s over a 10 s window (10 retries without traffic).
func TestBudgetSteps(t *testing.T) {
	b := mustNew(t, Options{Ratio: 0.2, MinPerSecond: 1, Window: 10 * time.Second})
	t0 := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	// No traffic: only the allowance, 10 retries.
	for i := range 10 {
		if !b.TryRetry(at(0)) {
			t.Fatalf("retry %d refused within the fixed allowance", i)
		}
	}
	if b.TryRetry(at(0)) {
		t.Fatal("11th retry allowed without traffic")
	}
	// 50 first attempts earn 0.2 × 50 = 10 more.
	for range 50 {
		b.Request(at(time.Second))
	}
	for i := range 10 {
		if !b.TryRetry(at(time.Second)) {
			t.Fatalf("earned retry %d refused", i)
		}
	}
	if b.TryRetry(at(time.Second)) {
		t.Fatal("retry beyond ratio×requests+allowance allowed")
	}
	if req, ret := b.Counts(at(time.Second)); req != 50 || ret != 20 {
		t.Fatalf("counts = %d requests, %d retries; want 50, 20", req, ret)
	}
	// 10.1 s after t0 the first 10 retries (made at t0) have left the
	// window: 10 retries free again.
	if req, ret := b.Counts(at(10*time.Second + 100*time.Millisecond)); req != 50 || ret != 10 {
		t.Fatalf("after the t0 bucket expired: %d requests, %d retries; want 50, 10", req, ret)
	}
	// Long idle: everything expires.
	if req, ret := b.Counts(at(time.Hour)); req != 0 || ret != 0 {
		t.Fatalf("after an hour: %d, %d", req, ret)
	}
}

// TestBudgetBoundsAmplification drives a failing upstream at a fixed rate:
// every first attempt fails and asks for a retry. Total retries stay within
// ratio × requests + allowance per window.
func TestBudgetBoundsAmplification(t *testing.T) {
	b := mustNew(t, Options{Ratio: 0.2, MinPerSecond: 5, Window: 10 * time.Second})
	t0 := time.Unix(2_000_000, 0)
	const rate, seconds = 200, 10
	var requests, retries int
	for i := range rate * seconds {
		now := t0.Add(time.Duration(i) * time.Second / rate)
		b.Request(now)
		requests++
		for range 2 { // attempts: 3
			if b.TryRetry(now) {
				retries++
			}
		}
	}
	limit := 0.2*float64(requests) + 5*seconds
	t.Logf("%d requests, %d retries (limit %.0f): amplification %.3f", requests, retries, limit, float64(requests+retries)/float64(requests))
	if float64(retries) > limit {
		t.Fatalf("%d retries > %.0f", retries, limit)
	}
	if float64(retries) < 0.9*limit {
		t.Fatalf("%d retries: the budget refused retries it had room for (limit %.0f)", retries, limit)
	}
}

func TestBudgetConcurrent(t *testing.T) {
	b := mustNew(t, Options{Ratio: 0.5, Window: 10 * time.Second})
	now := time.Unix(3_000_000, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				b.Request(now)
				if b.TryRetry(now) {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	req, ret := b.Counts(now)
	if req != 8000 || ret != int64(allowed) || float64(ret) > 0.5*8000 {
		t.Fatalf("requests %d retries %d allowed %d", req, ret, allowed)
	}
}

func BenchmarkBudget(b *testing.B) {
	bu, _ := New(Options{Ratio: 0.2, MinPerSecond: 5, Window: 10 * time.Second})
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t := now.Add(time.Duration(i) * time.Microsecond)
		bu.Request(t)
		if i%5 == 0 {
			bu.TryRetry(t)
		}
	}
}
