package proxy

import "testing"

// TestMirrorChosenSpread: a Mirror copies exactly per of every 10000
// requests, evenly spread (the gaps between chosen requests differ by at
// most one), and a reload's Mirror (Prev) goes on with the same counter.
func TestMirrorChosenSpread(t *testing.T) {
	for _, per := range []int{1, 29, 1250, 3333, 5000, 9999, 10000} {
		m := NewMirror(MirrorOptions{PerTenThousand: per, MaxInFlight: 1})
		chosen, last := 0, 0
		minGap, maxGap := 1<<30, 0
		for i := 1; i <= 20000; i++ {
			if i == 10000 {
				m = NewMirror(MirrorOptions{PerTenThousand: per, MaxInFlight: 1, Prev: m})
			}
			if !m.chosen() {
				continue
			}
			chosen++
			if last > 0 {
				minGap, maxGap = min(minGap, i-last), max(maxGap, i-last)
			}
			last = i
		}
		if chosen != 2*per {
			t.Errorf("per %d: %d of 20000 chosen, want %d", per, chosen, 2*per)
		}
		if chosen > 1 && maxGap-minGap > 1 {
			t.Errorf("per %d: gaps from %d to %d, want within one of each other", per, minGap, maxGap)
		}
	}
}
