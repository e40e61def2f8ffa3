package admission

import (
	"container/heap"
	"context"
	"math"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

// backendSim drives an adaptive Limiter against a simulated upstream that
// serves capacity requests at once in base time and slows down linearly
// beyond: latency = base × max(1, inflight/capacity), inflight counted when
// the request is admitted. Offered load is unbounded (closed loop: a slot
// freed is taken at once). Time is the fake clock; nothing sleeps.
type backendSim struct {
	l        *Limiter
	clk      *fakeClock
	base     time.Duration
	capacity float64
	jobs     jobHeap
	samples  int
}

type job struct {
	end time.Time
	rel Release
}

type jobHeap []job

func (h jobHeap) Len() int           { return len(h) }
func (h jobHeap) Less(i, j int) bool { return h[i].end.Before(h[j].end) }
func (h jobHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *jobHeap) Push(x any)        { *h = append(*h, x.(job)) }
func (h *jobHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newBackendSim(tb testing.TB, capacity int, base time.Duration, a AdaptiveOptions) *backendSim {
	tb.Helper()
	clk := newFakeClock()
	var n uint64
	l, err := New(Options{Adaptive: &a, QueueTimeout: time.Second, Clock: clk,
		Rand: func() uint64 { n += 0x9e3779b97f4a7c15; return n }})
	if err != nil {
		tb.Fatal(err)
	}
	return &backendSim{l: l, clk: clk, base: base, capacity: float64(capacity)}
}

// fill admits until the limiter refuses.
func (s *backendSim) fill() {
	for {
		rel, err := s.l.Acquire(context.Background(), "load", Normal)
		if err != nil {
			return
		}
		inflight := float64(s.jobs.Len() + 1)
		lat := time.Duration(float64(s.base) * math.Max(1, inflight/s.capacity))
		heap.Push(&s.jobs, job{end: s.clk.Now().Add(lat), rel: rel})
	}
}

// runUntil advances the simulation to fake time end.
func (s *backendSim) runUntil(end time.Time) {
	for {
		s.fill()
		if s.jobs.Len() == 0 || s.jobs[0].end.After(end) {
			s.clk.Set(end)
			return
		}
		j := heap.Pop(&s.jobs).(job)
		s.clk.Set(j.end)
		j.rel.Done(endpoint.Success)
		s.samples++
	}
}

// converge runs until the limit has stayed within [lo, hi] for hold, and
// returns the samples and simulated time it took to get there the last
// time (0 if it started inside), or ok false if it did not within limit.
func (s *backendSim) converge(lo, hi int, hold, limit time.Duration) (samples int, took time.Duration, ok bool) {
	const step = 10 * time.Millisecond
	start, startSamples := s.clk.Now(), s.samples
	var inSince time.Time
	inSamples := 0
	for t := start; t.Sub(start) < limit; t = t.Add(step) {
		s.runUntil(t.Add(step))
		cur := s.l.Limit()
		if cur < lo || cur > hi {
			inSince = time.Time{}
			continue
		}
		if inSince.IsZero() {
			inSince, inSamples = s.clk.Now(), s.samples
		}
		if s.clk.Now().Sub(inSince) >= hold {
			return inSamples - startSamples, inSince.Sub(start), true
		}
	}
	return 0, 0, false
}

func (s *backendSim) drain() {
	for s.jobs.Len() > 0 {
		heap.Pop(&s.jobs).(job).rel.Done(endpoint.Abandoned)
	}
}

var simOptions = AdaptiveOptions{Min: 2, Max: 500}

// convergenceRun starts at capacity 20, halves it to 10, doubles it to 40,
// and returns samples and simulated time to converge for each phase.
// Converged: the limit stays in [C, 1.5 C] for one simulated second.
type phase struct {
	name     string
	capacity int
	samples  int
	took     time.Duration
	ok       bool
	limit    int
}

func convergenceRun(tb testing.TB) []phase {
	s := newBackendSim(tb, 20, 20*time.Millisecond, simOptions)
	defer s.drain()
	phases := []phase{{name: "start", capacity: 20}, {name: "halve", capacity: 10}, {name: "double", capacity: 40}}
	for i := range phases {
		p := &phases[i]
		s.capacity = float64(p.capacity)
		p.samples, p.took, p.ok = s.converge(p.capacity, p.capacity*3/2, time.Second, 10*time.Second)
		s.runUntil(s.clk.Now().Add(2 * time.Second))
		p.limit = s.l.Limit()
	}
	return phases
}

func TestAdaptiveConverges(t *testing.T) {
	for _, p := range convergenceRun(t) {
		if !p.ok {
			t.Errorf("%s (capacity %d): did not settle in [%d, %d] within 10 simulated seconds (limit %d)",
				p.name, p.capacity, p.capacity, p.capacity*3/2, p.limit)
			continue
		}
		t.Logf("%-6s capacity %2d: converged after %5d samples, %v simulated; limit 2s later %d",
			p.name, p.capacity, p.samples, p.took, p.limit)
	}
}

func BenchmarkAdaptiveConvergence(b *testing.B) {
	var phases []phase
	for b.Loop() {
		phases = convergenceRun(b)
	}
	for _, p := range phases {
		if !p.ok {
			b.Fatalf("%s did not converge", p.name)
		}
		b.ReportMetric(float64(p.samples), p.name+"-samples")
		b.ReportMetric(p.took.Seconds(), p.name+"-sim-s")
	}
}

// TestGradientArithmetic pins the update formula on a hand-computed case.
func TestGradientArithmetic(t *testing.T) {
	g := newGradient(AdaptiveOptions{Min: 1, Max: 100, MinSamples: 1, Window: 1, ProbeSamples: 1})
	ms := int64(time.Millisecond)
	// Probe: one sample of 10ms → minRTT 10ms, limit back to Min (1).
	if !g.sample(10*ms, 0, false, zeroRand, 0) || g.minRTT != 10*ms || g.current() != 1 {
		t.Fatalf("after probe: minRTT %d limit %d", g.minRTT, g.current())
	}
	g.limit = 20
	g.peak = 20
	// sampleRTT 11ms = minRTT×1.1: gradient 1, limit 20 + sqrt(20) = 24.47.
	g.sample(100*ms, 89*ms, false, zeroRand, 20)
	if math.Abs(g.limit-24.472) > 0.01 {
		t.Fatalf("flat latency: limit %v, want 24.47", g.limit)
	}
	// sampleRTT 22ms: gradient 0.5: 12.236 + sqrt(12.236) = 15.73.
	g.peak = 30
	g.sample(200*ms, 178*ms, false, zeroRand, 20)
	if math.Abs(g.limit-15.734) > 0.01 {
		t.Fatalf("doubled latency: limit %v, want 15.73", g.limit)
	}
	// Low latency, but the limit (16) was not reached: no growth, whether
	// the peak was far below it or one short.
	now := 200 * ms
	for _, peak := range []int{3, 15} {
		now += 100 * ms
		g.peak = peak
		if !g.sample(now, now-5*ms, false, zeroRand, peak) || math.Abs(g.limit-15.734) > 0.01 {
			t.Fatalf("a window with peak %d: limit %v, want it closed at 15.73", peak, g.limit)
		}
	}
	// Reached: it grows (gradient 2 at 5 ms: 31.47 + sqrt(31.47) = 37.08).
	now += 100 * ms
	g.peak = 16
	g.sample(now, now-5*ms, false, zeroRand, 16)
	if want := 2*15.734 + math.Sqrt(2*15.734); math.Abs(g.limit-want) > 0.01 {
		t.Fatalf("a window that reached the limit: %v, want %v", g.limit, want)
	}
	g.limit = 15.734
	// A window of failures halves, whatever the latency.
	g.peak = 16
	g.sample(now+100*ms, now+99*ms, true, zeroRand, 16)
	if want := 15.734*0.5 + math.Sqrt(15.734*0.5); math.Abs(g.limit-want) > 0.01 {
		t.Fatalf("failures: limit %v, want %v", g.limit, want)
	}
}

func zeroRand() uint64 { return 0 }

// TestAdaptiveInitial: with Initial the limit is Initial as soon as the
// first probe (at Min) has measured minRTT, instead of growing there from
// Min window by window. A data source's case: a pool of 8 running 200 ms
// queries under a saturating load, Min 4, Initial 8. Goodput over 10
// simulated seconds is then within the first probe's cost of the pool's
// capacity (40/s); without Initial the first seconds run at half of it.
func TestAdaptiveInitial(t *testing.T) {
	run := func(initial int) (limitAt1500ms int, served int) {
		s := newBackendSim(t, 8, 200*time.Millisecond, AdaptiveOptions{Min: 4, Max: 8, Initial: initial})
		defer s.drain()
		start := s.clk.Now()
		s.runUntil(start.Add(1500 * time.Millisecond))
		limitAt1500ms = s.l.Limit()
		s.runUntil(start.Add(10 * time.Second))
		return limitAt1500ms, s.samples
	}
	withLimit, withServed := run(8)
	withoutLimit, withoutServed := run(0)
	t.Logf("Initial 8: limit %d at 1.5 s, %d served in 10 s (capacity 400); Initial 0: limit %d, %d served", withLimit, withServed, withoutLimit, withoutServed)
	if withLimit != 8 {
		t.Errorf("with Initial 8 the limit at 1.5 s is %d, want 8 (the first probe ends after 25 samples at 4: 1.25 s)", withLimit)
	}
	// The first probe runs at Min for its 25 samples (1.25 s at half the
	// capacity): 25 + 8.75 s × 40/s = 375 at best.
	if withServed < 360 || withServed <= withoutServed {
		t.Errorf("served %d with Initial 8 and %d without, want at least 360 of the capacity's 400 and more than without", withServed, withoutServed)
	}
	if _, err := New(Options{QueueTimeout: time.Second, Adaptive: &AdaptiveOptions{Min: 4, Max: 8, Initial: 9}}); err == nil {
		t.Error("Initial above Max accepted")
	}
}
