package health

import (
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// TestActiveCheckStateMachine steps one endpoint through check results
// with healthy_after 2 and unhealthy_after 3.
func TestActiveCheckStateMachine(t *testing.T) {
	c := &CheckOptions{HealthyAfter: 2, UnhealthyAfter: 3}
	mb := &member{weight: 100, stats: &endpoint.Stats{}}
	steps := []struct {
		ok          bool
		wantDown    bool
		wantFlipped bool
	}{
		{false, false, false},
		{false, false, false},
		{true, false, false}, // a pass breaks the failure run
		{false, false, false},
		{false, false, false},
		{false, true, true}, // third failure in a row
		{false, true, false},
		{true, true, false},
		{false, true, false}, // a failure breaks the pass run
		{true, true, false},
		{true, false, true}, // second pass in a row
		{true, false, false},
	}
	for i, s := range steps {
		flipped, up, _ := mb.recordCheck(s.ok, c)
		if mb.checkDown != s.wantDown || flipped != s.wantFlipped || (flipped && up == s.wantDown) {
			t.Fatalf("step %d (ok=%v): down=%v flipped=%v up=%v; want down=%v flipped=%v", i, s.ok, mb.checkDown, flipped, up, s.wantDown, s.wantFlipped)
		}
	}
}

// TestEjectionTimes: base × n, capped at max, n decaying by one per base
// spent back in service.
func TestEjectionTimes(t *testing.T) {
	o := &OutlierOptions{BaseEjectionTime: 30 * time.Second, MaxEjectionTime: 100 * time.Second}
	mb := &member{weight: 100, stats: &endpoint.Stats{}}
	now := t0
	want := []time.Duration{30 * time.Second, 60 * time.Second, 90 * time.Second, 100 * time.Second, 100 * time.Second}
	for i, w := range want {
		mb.stats.GatewayFailuresInARow.Store(7)
		if d := mb.eject(o, now); d != w {
			t.Fatalf("ejection %d lasts %v, want %v", i+1, d, w)
		}
		if !mb.ejected() || !mb.ejectedUntil.Equal(now.Add(w)) || mb.stats.GatewayFailuresInARow.Load() != 0 {
			t.Fatalf("ejection %d: until %v, runs %d", i+1, mb.ejectedUntil, mb.stats.GatewayFailuresInARow.Load())
		}
		now = mb.ejectedUntil
		mb.uneject(now) // fails again at once: no decay
	}
	// 5 ejections so far; 2 × base in service forgives two of them.
	now = now.Add(2*o.BaseEjectionTime + time.Second)
	if d := mb.eject(o, now); d != 100*time.Second {
		t.Fatalf("after decay to 3, the 4th lasts %v, want 100s (cap)", d)
	}
	if mb.ejections != 4 {
		t.Fatalf("ejections = %d, want 4", mb.ejections)
	}
	mb.uneject(now)
	if got := decayedEjections(4, now, o.BaseEjectionTime, now.Add(time.Hour)); got != 0 {
		t.Fatalf("after an hour in service %d ejections still count", got)
	}
	if got := ejectionTime(time.Second, 300*time.Second, 1<<40); got != 300*time.Second {
		t.Fatalf("huge multiplier: %v", got)
	}
}

// TestMayEject pins max_ejection_percent: ejected after the ejection must
// stay at most ⌊percent × n / 100⌋.
func TestMayEject(t *testing.T) {
	tests := []struct {
		ejected, n, percent int
		want                bool
	}{
		{0, 10, 50, true}, {4, 10, 50, true}, {5, 10, 50, false},
		{0, 1, 50, false}, {0, 1, 100, true}, {0, 2, 50, true}, {1, 2, 50, false},
		{0, 3, 50, true}, {1, 3, 50, false}, {0, 10, 0, false}, {9, 10, 100, true}, {10, 10, 100, false},
		{0, 9, 10, false}, {0, 10, 10, true},
	}
	for _, tt := range tests {
		if got := mayEject(tt.ejected, tt.n, tt.percent); got != tt.want {
			t.Errorf("mayEject(%d, %d, %d%%) = %v, want %v", tt.ejected, tt.n, tt.percent, got, tt.want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 10000).Draw(t, "n")
		pct := rapid.IntRange(0, 100).Draw(t, "percent")
		ejected := 0
		for ejected <= n && mayEject(ejected, n, pct) {
			ejected++
		}
		if ejected != pct*n/100 {
			t.Fatalf("n=%d percent=%d: %d ejectable, want %d", n, pct, ejected, pct*n/100)
		}
	})
}

// TestRampWeight steps a 10 s slow start: floor 10 %, ten steps, full
// weight at the window's end, and a weight never below 1.
func TestRampWeight(t *testing.T) {
	w := uint32(1000)
	window := 10 * time.Second
	tests := []struct {
		at       time.Duration
		want     uint32
		wantNext time.Duration // 0: none
	}{
		{0, 100, time.Second},
		{999 * time.Millisecond, 100, time.Second},
		{time.Second, 100, 2 * time.Second},
		{2 * time.Second, 200, 3 * time.Second},
		{5500 * time.Millisecond, 500, 6 * time.Second},
		{9999 * time.Millisecond, 900, 10 * time.Second},
		{10 * time.Second, 1000, 0},
		{time.Hour, 1000, 0},
	}
	for _, tt := range tests {
		got, next := rampWeight(w, t0, window, t0.Add(tt.at))
		wantNext := time.Time{}
		if tt.wantNext != 0 {
			wantNext = t0.Add(tt.wantNext)
		}
		if got != tt.want || !next.Equal(wantNext) {
			t.Errorf("at %v: weight %d next %v; want %d next %v", tt.at, got, next, tt.want, wantNext)
		}
	}
	if got, _ := rampWeight(1, t0, window, t0); got != 1 {
		t.Errorf("weight 1 ramps to %d, want 1", got)
	}
	// A short window has fewer steps, each at least 100 ms.
	if s := rampStepsFor(300 * time.Millisecond); s != 3 {
		t.Errorf("steps for 300ms = %d, want 3", s)
	}
	if s := rampStepsFor(50 * time.Millisecond); s != 1 {
		t.Errorf("steps for 50ms = %d, want 1", s)
	}
	// Property: the ramp never decreases and stays within [1, w].
	rapid.Check(t, func(t *rapid.T) {
		w := rapid.Uint32Range(1, 1_000_000).Draw(t, "w")
		window := time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "window"))
		a := time.Duration(rapid.Int64Range(0, int64(2*window)).Draw(t, "a"))
		b := a + time.Duration(rapid.Int64Range(0, int64(window)).Draw(t, "b"))
		wa, _ := rampWeight(w, t0, window, t0.Add(a))
		wb, _ := rampWeight(w, t0, window, t0.Add(b))
		if wa < 1 || wa > w || wb < wa {
			t.Fatalf("w=%d window=%v: %d at %v, %d at %v", w, window, wa, a, wb, b)
		}
	})
}

// TestPlanPanic: the panic decision by weight, and what each mode builds.
func TestPlanPanic(t *testing.T) {
	eps := []*endpoint.Endpoint{endpoint.New("a", 300), endpoint.New("b", 100), endpoint.New("c", 100), endpoint.New("d", 0)}
	tests := []struct {
		name      string
		serving   []bool
		threshold float64
		wantPanic bool
		want      []uint32
	}{
		{"all healthy", []bool{true, true, true, true}, 0.5, false, []uint32{300, 100, 100, 0}},
		{"60% healthy, threshold 50%", []bool{true, false, false, true}, 0.5, false, []uint32{300, 0, 0, 0}},
		{"40% healthy, threshold 50%", []bool{false, true, true, true}, 0.5, true, []uint32{300, 100, 100, 0}},
		{"40% healthy, panic off", []bool{false, true, true, true}, 0, false, []uint32{0, 100, 100, 0}},
		{"exactly the threshold is not panic", []bool{false, true, true, false}, 0.4, false, []uint32{0, 100, 100, 0}},
		{"nothing healthy", []bool{false, false, false, false}, 0.5, true, []uint32{300, 100, 100, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := plan(eps, func(i int) (bool, time.Time) { return tt.serving[i], time.Time{} }, tt.threshold, 0, t0)
			if p.Panic != tt.wantPanic {
				t.Fatalf("panic = %v, want %v", p.Panic, tt.wantPanic)
			}
			for i, e := range p.Endpoints {
				if e.Weight != tt.want[i] || e.Stats != eps[i].Stats || e.Address != eps[i].Address {
					t.Fatalf("endpoint %d: %+v, want weight %d sharing the input's Stats", i, e, tt.want[i])
				}
				if e.Weight == eps[i].Weight && e != eps[i] {
					t.Errorf("endpoint %d copied although unchanged", i)
				}
			}
		})
	}
	// Slow start applies outside panic.
	p, next := plan(eps[:2], func(i int) (bool, time.Time) { return true, t0 }, 0.5, 10*time.Second, t0.Add(5*time.Second))
	if p.Endpoints[0].Weight != 150 || p.Endpoints[1].Weight != 50 || !next.Equal(t0.Add(6*time.Second)) {
		t.Fatalf("ramped: %d, %d, next %v", p.Endpoints[0].Weight, p.Endpoints[1].Weight, next)
	}
}
