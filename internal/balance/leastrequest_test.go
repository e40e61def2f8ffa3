package balance

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/testkit"
)

// TestLeastRequestChoiceRule is a step table for the choice rule: the random
// numbers are chosen so that the draws give the named candidates, then the
// inflight counts decide. Score without EWMA: inflight/weight, lower wins,
// a tie goes to the first draw.
func TestLeastRequestChoiceRule(t *testing.T) {
	tests := []struct {
		name     string
		weights  []uint32
		inflight []int64
		draws    []int // endpoint indexes the random numbers draw, in order
		want     int
	}{
		{"idle tie: first draw wins", []uint32{100, 100, 100}, []int64{0, 0, 0}, []int{1, 2}, 1},
		{"idle tie, other order", []uint32{100, 100, 100}, []int64{0, 0, 0}, []int{2, 1}, 2},
		{"fewer in flight wins", []uint32{100, 100, 100}, []int64{5, 0, 3}, []int{0, 2}, 2},
		{"fewer in flight wins as first", []uint32{100, 100, 100}, []int64{5, 0, 3}, []int{2, 0}, 2},
		{"per unit of weight: 3/300 < 2/100", []uint32{100, 300}, []int64{2, 3}, []int{0, 1}, 1},
		{"per unit of weight: 4/300 > 1/100", []uint32{100, 300}, []int64{1, 4}, []int{1, 0}, 0},
		{"equal load per weight: tie, first", []uint32{100, 300}, []int64{1, 3}, []int{1, 0}, 1},
		{"equal load per weight: tie, first (b)", []uint32{100, 300}, []int64{1, 3}, []int{0, 1}, 0},
		{"negative inflight counts as 0", []uint32{100, 100}, []int64{-7, 0}, []int{1, 0}, 1},
		{"second draw repeats: redrawn", []uint32{100, 100, 100}, []int64{4, 4, 1}, []int{0, 0, 2}, 2},
		{"drained never drawn, nil skipped", []uint32{0, 100, 100}, []int64{0, 9, 1}, []int{0, 1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eps := endpoints(tt.weights...)
			for i, n := range tt.inflight {
				eps[i].Stats.Inflight.Store(n)
			}
			probe := NewLeastRequest(eps, LeastRequestOptions{})
			live := map[*endpoint.Endpoint]int{}
			for i, e := range probe.eps {
				live[e] = i
			}
			// draws name live positions (drained entries dropped).
			var rs []uint64
			for _, d := range tt.draws {
				rs = append(rs, randFor(t, probe, d))
			}
			p := NewLeastRequest(eps, LeastRequestOptions{Rand: seqRand(t, rs...)})
			e, err := p.Pick()
			if err != nil {
				t.Fatal(err)
			}
			if got := live[e]; got != tt.want {
				t.Fatalf("picked live endpoint %d (%s), want %d", got, e.Address, tt.want)
			}
		})
	}
}

// TestLeastRequestRedrawThenUniform: when every weighted redraw repeats the
// first candidate, the second is chosen uniformly among the others, so the
// candidates always differ and the pick still returns after 5 numbers.
func TestLeastRequestRedrawThenUniform(t *testing.T) {
	eps := endpoints(1000000, 1, 1)
	eps[0].Stats.Inflight.Store(10)
	probe := NewLeastRequest(eps, LeastRequestOptions{})
	r0 := randFor(t, probe, 0)
	// a, then 1 + redraws weighted draws of a again, then 0 → the first of
	// the others: 6 numbers, the most a pick uses.
	p := NewLeastRequest(eps, LeastRequestOptions{Rand: seqRand(t, r0, r0, r0, r0, r0, 0)})
	if e, _ := p.Pick(); e != eps[1] {
		t.Fatalf("picked %v, want b (a is loaded)", e)
	}
}

func TestLeastRequestNoEndpoint(t *testing.T) {
	for _, eps := range [][]*endpoint.Endpoint{nil, {}, endpoints(0, 0), {nil, nil}} {
		for _, o := range []LeastRequestOptions{{}, {EWMA: true}} {
			p := NewLeastRequest(eps, o)
			if e, err := p.Pick(); e != nil || !errors.Is(err, ErrNoEndpoint) {
				t.Fatalf("Pick() = %v, %v; want ErrNoEndpoint", e, err)
			}
			if e, err := p.PickAt(time.Unix(1, 0)); e != nil || !errors.Is(err, ErrNoEndpoint) {
				t.Fatalf("PickAt() = %v, %v; want ErrNoEndpoint", e, err)
			}
		}
	}
	var zero LeastRequest
	if e, err := zero.Pick(); e != nil || !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("zero value Pick() = %v, %v; want ErrNoEndpoint", e, err)
	}
}

// TestLeastRequestNilStats: an Endpoint built without New has no Stats; the
// picker treats its inflight as 0 instead of panicking.
func TestLeastRequestNilStats(t *testing.T) {
	eps := []*endpoint.Endpoint{{Address: "a", Weight: 1}, {Address: "b", Weight: 1}}
	p := NewLeastRequest(eps, LeastRequestOptions{})
	for range 100 {
		if _, err := p.Pick(); err != nil {
			t.Fatal(err)
		}
	}
}

// shares picks n times and returns each live endpoint's count.
func shares(t *testing.T, p *LeastRequest, n int) []int {
	t.Helper()
	idx := map[*endpoint.Endpoint]int{}
	for i, e := range p.eps {
		idx[e] = i
	}
	c := make([]int, len(p.eps))
	for range n {
		e, err := p.Pick()
		if err != nil {
			t.Fatal(err)
		}
		c[idx[e]]++
	}
	return c
}

// TestLeastRequestIdleSharesFollowWeights: with nothing in flight every
// score ties, the first draw wins, and shares are w_i/W. Tolerance: 5
// standard deviations of the binomial count plus 1.
func TestLeastRequestIdleSharesFollowWeights(t *testing.T) {
	w := []uint32{100, 200, 300, 400, 1, 1000000, 0, 50}
	eps := endpoints(w...)
	r := rand.New(rand.NewPCG(1, 2))
	p := NewLeastRequest(eps, LeastRequestOptions{Rand: r.Uint64})
	const n = 400000
	got := shares(t, p, n)
	checkShares(t, got, p.weights, n)
}

func checkShares(t *testing.T, got []int, w []uint32, n int) {
	t.Helper()
	var W float64
	for _, x := range w {
		W += float64(x)
	}
	for i, c := range got {
		q := float64(w[i]) / W
		want := float64(n) * q
		if tol := 5*math.Sqrt(float64(n)*q*(1-q)) + 1; math.Abs(float64(c)-want) > tol {
			t.Errorf("endpoint %d (weight %d): %d of %d picks, want %.0f ± %.0f", i, w[i], c, n, want, tol)
		}
	}
}

// TestLeastRequestAvoidsLoaded: an endpoint whose inflight is held high
// loses every comparison (candidates are distinct), so it gets no picks;
// one with half the load per weight of the others gets more than its
// weight share.
func TestLeastRequestAvoidsLoaded(t *testing.T) {
	eps := endpoints(100, 100, 100, 100)
	eps[0].Stats.Inflight.Store(50)
	r := rand.New(rand.NewPCG(3, 4))
	p := NewLeastRequest(eps, LeastRequestOptions{Rand: r.Uint64})
	got := shares(t, p, 100000)
	if got[0] != 0 {
		t.Fatalf("loaded endpoint picked %d times, want 0 (counts %v)", got[0], got)
	}
	for i := 1; i < 4; i++ {
		eps[i].Stats.Inflight.Store(4)
	}
	eps[0].Stats.Inflight.Store(2)
	got = shares(t, p, 100000)
	// a wins every pair it is in: P = 1 − (3/4)(2/3) = 1/2.
	if got[0] < 45000 || got[0] > 55000 {
		t.Fatalf("least-loaded endpoint picked %d of 100000, want about 50000 (counts %v)", got[0], got)
	}
}

// TestLatencyDecay checks the peak-EWMA arithmetic with explicit times.
func TestLatencyDecay(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tau := 10 * time.Second
	var l Latency
	l.Observe(100*time.Millisecond, t0, tau) // above 0: peak, taken at once
	if got := l.Estimate(t0, tau); got != 100*time.Millisecond {
		t.Fatalf("after a peak: %v, want 100ms", got)
	}
	// Read decay: after τ the estimate is 1/e of itself.
	peak := float64(100 * time.Millisecond)
	if got, want := l.Estimate(t0.Add(tau), tau), time.Duration(peak/math.E); absDur(got-want) > time.Microsecond {
		t.Fatalf("after τ: %v, want %v", got, want)
	}
	if got := l.Estimate(t0.Add(-time.Second), tau); got != 100*time.Millisecond {
		t.Fatalf("before the stamp (clock stepped back): %v, want no decay", got)
	}
	// A lower sample after τ: est·(1/e) + rtt·(1 − 1/e).
	l.Observe(20*time.Millisecond, t0.Add(tau), tau)
	want := 100*time.Millisecond.Seconds()/math.E + 20*time.Millisecond.Seconds()*(1-1/math.E)
	if got := l.Estimate(t0.Add(tau), tau).Seconds(); math.Abs(got-want) > 1e-6 {
		t.Fatalf("blend after τ: %.6fs, want %.6fs", got, want)
	}
	// A lower sample at the same instant: d = 1, no change.
	before := l.Estimate(t0.Add(tau), tau)
	l.Observe(time.Millisecond, t0.Add(tau), tau)
	if got := l.Estimate(t0.Add(tau), tau); got != before {
		t.Fatalf("same-instant lower sample moved the estimate: %v → %v", before, got)
	}
	// A higher sample: peak again.
	l.Observe(time.Second, t0.Add(2*tau), tau)
	if got := l.Estimate(t0.Add(2*tau), tau); got != time.Second {
		t.Fatalf("second peak: %v, want 1s", got)
	}
	// Far in the future the estimate has decayed to nothing.
	if got := l.Estimate(t0.Add(100*tau), tau); got != 0 {
		t.Fatalf("after 100τ: %v, want 0", got)
	}
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }

// TestLeastRequestEWMA: with equal inflight, the endpoint with the lower
// latency estimate wins; once its latency spikes the other wins; as the
// spike decays without new samples, cost ∝ estimate·(inflight+1)/w brings
// it back. Prev carries estimates over by address.
func TestLeastRequestEWMA(t *testing.T) {
	clk := testkit.NewClock(time.Unix(5000, 0))
	eps := endpoints(100, 100)
	r := rand.New(rand.NewPCG(5, 6))
	o := LeastRequestOptions{EWMA: true, Now: clk.Now, Rand: r.Uint64}
	p := NewLeastRequest(eps, o)
	if got := p.Latency(eps[0]).Estimate(clk.Now(), DefaultTau); got != DefaultRTT {
		t.Fatalf("fresh estimate %v, want DefaultRTT", got)
	}
	p.Observe(eps[0], 10*time.Millisecond, clk.Now())  // below 30ms: blended, but d = 1 at the same instant
	p.Observe(eps[0], 200*time.Millisecond, clk.Now()) // peak
	p.Observe(eps[1], 50*time.Millisecond, clk.Now())  // peak over 30ms
	if got := shares(t, p, 1000); got[1] != 1000 {
		t.Fatalf("slow a vs fast b: counts %v, want all b", got)
	}
	// b has 3 in flight: 50·4 = 200 ≥ 200·1? equal → tie → first draw.
	eps[1].Stats.Inflight.Store(3)
	if got := shares(t, p, 10000); got[0] < 4500 || got[0] > 5500 {
		t.Fatalf("equal cost: counts %v, want about even", got)
	}
	eps[1].Stats.Inflight.Store(0)
	// Both estimates decay by the same factor: b stays ahead.
	clk.Advance(3 * DefaultTau)
	if got := shares(t, p, 1000); got[1] != 1000 {
		t.Fatalf("after 3τ without samples: counts %v, want all b", got)
	}
	// New samples at both: a blends 200ms toward 5ms with d = e^−3 (about
	// 14.7ms); b's 50ms is at least its stored 50ms, so it stays 50ms.
	p.Observe(eps[0], 5*time.Millisecond, clk.Now())
	p.Observe(eps[1], 50*time.Millisecond, clk.Now())
	if got := shares(t, p, 1000); got[0] != 1000 {
		t.Fatalf("a answered fast: counts %v, want all a", got)
	}
	// Rebuild with a new endpoint object for a's address: estimates carry over.
	a2 := endpoint.New(eps[0].Address, 300)
	q := NewLeastRequest([]*endpoint.Endpoint{a2, eps[1], endpoint.New("c", 100)}, LeastRequestOptions{EWMA: true, Now: clk.Now, Prev: p})
	if q.Latency(a2) != p.Latency(eps[0]) {
		t.Fatalf("estimate for %s not carried over", a2.Address)
	}
	if got := q.Latency(q.eps[2]).Estimate(clk.Now(), DefaultTau); got != DefaultRTT {
		t.Fatalf("new address estimate %v, want DefaultRTT", got)
	}
	if q.Observe(eps[0], time.Millisecond, clk.Now()) {
		t.Fatal("Observe accepted an endpoint that is not in the snapshot")
	}
}

// TestLeastRequestConcurrent picks, begins/ends requests and observes from
// several goroutines (run with -race): every pick is live.
func TestLeastRequestConcurrent(t *testing.T) {
	eps := endpoints(100, 200, 0, 300, 400)
	p := NewLeastRequest(eps, LeastRequestOptions{EWMA: true})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				e, err := p.Pick()
				if err != nil || e.Weight == 0 {
					t.Errorf("Pick() = %v, %v", e, err)
					return
				}
				e.Begin()
				p.Observe(e, time.Duration(g*i)*time.Microsecond, time.Now())
				e.End(endpoint.Success)
			}
		})
	}
	wg.Wait()
}

func TestLeastRequestPickDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 2, 100, 10000} {
		eps := endpoints(randomWeights(r, n, maxWeight)...)
		for _, o := range []LeastRequestOptions{{}, {EWMA: true}} {
			p := NewLeastRequest(eps, o)
			if allocs := testing.AllocsPerRun(1000, func() { _, _ = p.Pick() }); allocs != 0 {
				t.Errorf("n=%d, EWMA %v: Pick allocates %.1f times", n, o.EWMA, allocs)
			}
			if n > 0 {
				if allocs := testing.AllocsPerRun(1000, func() { p.Observe(eps[0], time.Millisecond, time.Unix(1, 0)) }); allocs != 0 {
					t.Errorf("n=%d: Observe allocates %.1f times", n, allocs)
				}
			}
		}
	}
}
