package limits

import (
	"math"
	"testing"
	"time"
)

func TestCheckRateEdges(t *testing.T) {
	for _, c := range []struct {
		rate float64
		ok   bool
	}{
		{1e-6, true}, {1, true}, {MaxRate, true}, {0.5, true},
		{0, false}, {-1, false}, {1e-7, false}, {0.99e-6, false}, {math.Nextafter(MaxRate, math.Inf(1)), false},
		{math.NaN(), false}, {math.Inf(1), false}, {math.Inf(-1), false},
	} {
		if got := CheckRate(c.rate) == ""; got != c.ok {
			t.Errorf("CheckRate(%v) ok = %v, want %v (%q)", c.rate, got, c.ok, CheckRate(c.rate))
		}
	}
}

// TestDefaultBurstFits: the default burst of every rate CheckRate accepts
// passes CheckBurst, so an omitted burst never makes a limit invalid; and
// burst × interval stays at most MaxBurstWindow for every accepted pair
// checked, the bound that keeps the rate limiter's arithmetic in an int64.
func TestDefaultBurstFits(t *testing.T) {
	for _, rate := range []float64{1e-6, 1.5e-6, 1e-3, 0.3, 1, 2.5, 1000, 123456.7, 1e9} {
		if CheckRate(rate) != "" {
			t.Fatalf("CheckRate(%v) = %q", rate, CheckRate(rate))
		}
		b := DefaultBurst(rate)
		if p := CheckBurst(rate, b); p != "" {
			t.Errorf("CheckBurst(%v, DefaultBurst = %d) = %q", rate, b, p)
		}
		maxB := int64(MaxBurstWindow / Interval(rate))
		maxB = min(maxB, MaxBurst)
		if CheckBurst(rate, maxB) != "" || (maxB < MaxBurst && CheckBurst(rate, maxB+1) == "") {
			t.Errorf("rate %v: the largest burst should be %d", rate, maxB)
		}
		if time.Duration(maxB)*Interval(rate) > MaxBurstWindow {
			t.Errorf("rate %v burst %d: window %v over %v", rate, maxB, time.Duration(maxB)*Interval(rate), MaxBurstWindow)
		}
	}
}

func TestValidID(t *testing.T) {
	for s, ok := range map[string]bool{"a": true, "a.b-c_9": true, "": false, "A": false, "a/b": false,
		string(make([]byte, MaxIDLen)): false} {
		if ValidID(s) != ok {
			t.Errorf("ValidID(%q) = %v", s, !ok)
		}
	}
}
