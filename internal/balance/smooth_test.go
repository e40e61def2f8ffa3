package balance

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/levee-gw/levee/internal/endpoint"
)

// picks returns the addresses of the next n picks, concatenated.
func picks(t *testing.T, p Picker, n int) string {
	t.Helper()
	var b strings.Builder
	for range n {
		e, err := p.Pick()
		if err != nil {
			t.Fatalf("Pick() error %v", err)
		}
		b.WriteString(e.Address)
	}
	return b.String()
}

func TestSmoothWeightedSequences(t *testing.T) {
	tests := []struct {
		name    string
		weights []uint32
		cycle   string // one cycle of NGINX's order; checked three times over
	}{
		{"3-1", []uint32{3, 1}, "aaba"},
		{"5-1-1", []uint32{5, 1, 1}, "aabacaa"},
		{"drained first", []uint32{0, 1}, "b"},
		{"drained middle", []uint32{1, 0, 2}, "cac"},
		{"gcd 100 gives the 3-1 order", []uint32{300, 100}, "aaba"},
		{"gcd 2", []uint32{4, 2}, "aba"},
		{"equal", []uint32{1, 1, 1}, "abc"},
		{"equal large", []uint32{7, 7}, "ab"},
		{"duplicates 2-2-1", []uint32{2, 2, 1}, "abcab"},
		{"duplicates 1-5-5", []uint32{1, 5, 5}, "bcbcabcbcbc"},
		{"above the maximum clamps to it", []uint32{endpoint.MaxWeight*endpoint.WeightScale + 1, math.MaxUint32, endpoint.MaxWeight * endpoint.WeightScale}, "abc"},
		{"single", []uint32{9}, "a"},
		{"single among drained", []uint32{0, 0, 3, 0}, "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eps := endpoints(tt.weights...)
			p := NewSmoothWeighted(eps)
			want := strings.Repeat(tt.cycle, 3)
			if got := picks(t, p, len(want)); got != want {
				t.Fatalf("weights %v: picks %q, want %q", tt.weights, got, want)
			}
			if len(p.sched) != len(tt.cycle) {
				t.Fatalf("cycle length %d, want %d", len(p.sched), len(tt.cycle))
			}
			checkPicker(t, eps, p)
		})
	}
}

func TestSmoothWeightedNoEndpoint(t *testing.T) {
	tests := []struct {
		name string
		eps  []*endpoint.Endpoint
	}{
		{"nil", nil},
		{"empty", []*endpoint.Endpoint{}},
		{"one drained", endpoints(0)},
		{"all drained", endpoints(0, 0, 0)},
		{"nil entries", []*endpoint.Endpoint{nil, nil}},
		{"nil and drained", append([]*endpoint.Endpoint{nil}, endpoints(0)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewSmoothWeighted(tt.eps)
			for range 3 {
				e, err := p.Pick()
				if e != nil || !errors.Is(err, ErrNoEndpoint) {
					t.Fatalf("Pick() = %v, %v; want nil, ErrNoEndpoint", e, err)
				}
			}
		})
	}
	t.Run("zero value", func(t *testing.T) {
		var p SmoothWeighted
		if e, err := p.Pick(); e != nil || !errors.Is(err, ErrNoEndpoint) {
			t.Fatalf("Pick() = %v, %v; want nil, ErrNoEndpoint", e, err)
		}
	})
}

// TestSmoothWeightedZeroWeightDrained pins the outage levee was written after:
// a registry sent one instance's weight as "0", and the balancer's gcd over
// the weights never returned. Here 0 is drained: it is never picked, never
// reaches the gcd, and building returns.
func TestSmoothWeightedZeroWeightDrained(t *testing.T) {
	eps := endpoints(10, 0, 20, 0)
	p := NewSmoothWeighted(eps)
	for i := range 300 {
		e, err := p.Pick()
		if err != nil {
			t.Fatalf("pick %d: %v", i, err)
		}
		if e.Weight == 0 {
			t.Fatalf("pick %d: drained endpoint %s", i, e.Address)
		}
	}
	if got := picks(t, NewSmoothWeighted(eps), 3); got != "cac" {
		t.Fatalf("weights 10,0,20,0: %q, want %q", got, "cac")
	}
}

func TestSmoothWeightedNilEntriesAreDrained(t *testing.T) {
	live := endpoints(1, 2)
	eps := []*endpoint.Endpoint{nil, live[0], nil, live[1], nil}
	p := NewSmoothWeighted(eps)
	// weights {1, 2}: NGINX gives b a b.
	if got := picks(t, p, 6); got != "babbab" {
		t.Fatalf("picks %q, want %q", got, "babbab")
	}
}

func TestSmoothWeightedKeepsNoReferenceToInput(t *testing.T) {
	eps := endpoints(3, 1)
	orig := append([]*endpoint.Endpoint(nil), eps...)
	p := NewSmoothWeighted(eps)
	for i := range eps {
		if eps[i] != orig[i] {
			t.Fatalf("NewSmoothWeighted modified eps[%d]", i)
		}
	}
	eps[0], eps[1] = endpoint.New("x", 1), nil // the caller reuses its slice
	if got := picks(t, p, 8); got != "aabaaaba" {
		t.Fatalf("after the caller changed its slice: %q, want %q", got, "aabaaaba")
	}
}

// fib returns Fibonacci numbers F(0)..F(47) (F(47) is the largest below 2^32).
func fib() []uint32 {
	f := []uint32{0, 1}
	for len(f) < 48 {
		f = append(f, f[len(f)-1]+f[len(f)-2])
	}
	return f
}

func TestGCD(t *testing.T) {
	f := fib()
	tests := []struct {
		a, b, want uint32
	}{
		{1, 1, 1},
		{12, 18, 6},
		{18, 12, 6},
		{7, 0, 7},
		{0, 7, 7},
		{300, 100, 100},
		{endpoint.MaxWeight, 9999, 1},
		{math.MaxUint32, math.MaxUint32, math.MaxUint32},
		{math.MaxUint32, math.MaxUint32 - 1, 1},
		{1 << 31, 1 << 30, 1 << 30},
		{f[47], f[46], 1},
	}
	for _, tt := range tests {
		g, ok := gcd(tt.a, tt.b, gcdMaxSteps)
		if !ok || g != tt.want {
			t.Errorf("gcd(%d, %d) = %d, %v; want %d, true", tt.a, tt.b, g, ok, tt.want)
		}
	}
}

// TestGCDBound pins the loop that caused the outage: Euclid's loop is
// bounded, the bound is tight for the worst uint32 input, and hitting it
// returns the safe fallback 1 instead of spinning.
func TestGCDBound(t *testing.T) {
	f := fib()
	if f[47] < f[46] || uint64(f[46])+uint64(f[47]) <= math.MaxUint32 {
		t.Fatalf("F(47) = %d is not the largest Fibonacci number below 2^32", f[47])
	}
	// F(46), F(47) in this order: one swap, then 45 steps down the sequence.
	if g, ok := gcd(f[46], f[47], 46); !ok || g != 1 {
		t.Fatalf("gcd(F46, F47) within 46 steps = %d, %v; want 1, true", g, ok)
	}
	if g, ok := gcd(f[46], f[47], 45); ok || g != 1 {
		t.Fatalf("gcd(F46, F47) within 45 steps = %d, %v; want fallback 1, false", g, ok)
	}
	if gcdMaxSteps < 46 {
		t.Fatalf("gcdMaxSteps = %d is below the uint32 worst case of 46", gcdMaxSteps)
	}
	// No pair of uint32 needs more than 46 steps; sample the space.
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		a, b := r.Uint32(), r.Uint32()>>r.UintN(32)
		if _, ok := gcd(a, b, 46); !ok {
			t.Fatalf("gcd(%d, %d) needs more than 46 steps", a, b)
		}
	}
	// A bound of 0 still returns at once.
	if g, ok := gcd(12, 18, 0); ok || g != 1 {
		t.Fatalf("gcd(12, 18) within 0 steps = %d, %v; want fallback 1, false", g, ok)
	}
}

func TestApportion(t *testing.T) {
	tests := []struct {
		name  string
		w     []uint32
		limit int
		want  []uint32
	}{
		{"fits: only gcd", []uint32{300, 100}, 8, []uint32{3, 1}},
		{"fits exactly", []uint32{5, 3}, 8, []uint32{5, 3}},
		// T = 5−3 = 2 slots: 7·2/10 = 1 r4, 2·2/10 = 0 r4, 1·2/10 = 0 r2;
		// the spare slot goes to the earliest largest remainder (a), then
		// b and c are raised to 1.
		{"largest remainder, ties earliest, raise to 1", []uint32{7, 2, 1}, 5, []uint32{2, 1, 1}},
		// T = 47: 1·47/100 = 0 r47 twice, 98·47/100 = 46 r6; the spare goes
		// to a, c is raised.
		{"tiny among heavy", []uint32{1, 1, 98}, 50, []uint32{1, 1, 46}},
		// T = 8: 4·8/13 = 2 r6 twice, 5·8/13 = 3 r1: the spare slot goes to
		// the earlier of the tied remainders.
		{"tied remainders, earliest wins", []uint32{4, 4, 5}, 11, []uint32{3, 2, 3}},
		// T = 9: 10·9/31 = 2 r28 twice, 11·9/31 = 3 r6: spares to a and b
		// give 3,3,3, which the second gcd reduces to 1,1,1.
		{"gcd again after scaling", []uint32{10, 10, 11}, 12, []uint32{1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := apportion(append([]uint32(nil), tt.w...), tt.limit)
			if !equal(got, tt.want) {
				t.Fatalf("apportion(%v, %d) = %v, want %v", tt.w, tt.limit, got, tt.want)
			}
		})
	}
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func randomWeights(r *rand.Rand, n int, maxW uint32) []uint32 {
	w := make([]uint32, n)
	for i := range w {
		w[i] = 1 + r.Uint32N(maxW)
	}
	return w
}

func TestSmoothWeightedLargePool(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	eps := endpoints(randomWeights(r, 10000, endpoint.MaxWeight)...)
	p := NewSmoothWeighted(eps)
	if p.exact {
		t.Fatalf("10,000 endpoints built in the exact regime")
	}
	if len(p.sched) > maxSchedule(len(eps)) {
		t.Fatalf("schedule length %d above cap %d", len(p.sched), maxSchedule(len(eps)))
	}
	checkPicker(t, eps, p)
}

// TestSmoothWeightedHeavyAmongLight is the shape that makes plain EDF or a
// naive weighted list bunch: one endpoint holds half the weight and
// thousands hold 1 each. The heavy one must still get every other pick, not
// a run of thousands followed by a run of the light ones.
func TestSmoothWeightedHeavyAmongLight(t *testing.T) {
	w := make([]uint32, 5001)
	w[0] = 5000
	for i := 1; i < len(w); i++ {
		w[i] = 1
	}
	eps := endpoints(w...)
	p := NewSmoothWeighted(eps)
	if p.exact {
		t.Fatalf("want the Pfair regime for L·k = %d", len(p.sched)*len(eps))
	}
	checkPicker(t, eps, p)
	for s := 0; s+1 < len(p.sched); s += 2 {
		if (p.sched[s] == 0) == (p.sched[s+1] == 0) {
			t.Fatalf("slots %d, %d: %d, %d; want the heavy endpoint in exactly one of each pair", s, s+1, p.sched[s], p.sched[s+1])
		}
	}
}

func TestSmoothWeightedRegimeBoundary(t *testing.T) {
	// 64 endpoints summing to 2^16: L·k = 2^22, the largest exact build.
	w := make([]uint32, 64)
	for i := range w {
		w[i] = 1024
	}
	w[0], w[1] = 1023, 1025
	eps := endpoints(w...)
	p := NewSmoothWeighted(eps)
	if !p.exact || len(p.sched)*len(eps) != exactBudget {
		t.Fatalf("exact = %v, L·k = %d; want the exact regime at L·k = %d", p.exact, len(p.sched)*len(eps), exactBudget)
	}
	checkPicker(t, eps, p)
	// One more endpoint tips it over the budget.
	eps = endpoints(append(w, 1)...)
	p = NewSmoothWeighted(eps)
	if p.exact {
		t.Fatalf("L·k = %d built exactly, want Pfair", len(p.sched)*len(eps))
	}
	checkPicker(t, eps, p)
}

func TestSmoothWeightedConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	eps := endpoints(randomWeights(r, 50, 40)...)
	p := NewSmoothWeighted(eps)
	const goroutines, cycles = 8, 16
	total := cycles * len(p.sched)
	index := make(map[*endpoint.Endpoint]int, len(eps))
	for i, e := range eps {
		index[e] = i
	}
	counts := make([][]int, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		counts[g] = make([]int, len(eps))
		n := total / goroutines
		if g == 0 {
			n += total % goroutines
		}
		wg.Go(func() {
			for range n {
				e, err := p.Pick()
				if err != nil {
					t.Errorf("Pick() error %v", err)
					return
				}
				counts[g][index[e]]++
			}
		})
	}
	wg.Wait()
	for i := range eps {
		var got int
		for g := range goroutines {
			got += counts[g][i]
		}
		if want := cycles * int(p.weights[i]); got != want {
			t.Errorf("endpoint %d: %d picks over %d cycles, want %d", i, got, cycles, want)
		}
	}
}

func TestSmoothWeightedPickDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 2, 100, 10000} {
		p := NewSmoothWeighted(endpoints(randomWeights(r, n, endpoint.MaxWeight)...))
		if allocs := testing.AllocsPerRun(1000, func() { _, _ = p.Pick() }); allocs != 0 {
			t.Errorf("n=%d: Pick allocates %.1f times", n, allocs)
		}
	}
}
