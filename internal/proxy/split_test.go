package proxy

import (
	"fmt"
	"net/http"
	"testing"
)

// splitSides returns n side routes, each to its own upstream with a
// serving Balance (Down false).
func splitSides(n int) []*Route {
	sides := make([]*Route, n)
	for i := range sides {
		sides[i] = &Route{Name: "r", Upstream: (&Upstream{Name: fmt.Sprintf("u%d", i)}).WithBalance(&Balance{})}
	}
	return sides
}

// TestSplitPicks: weighted picks give each side exactly its weight per
// cycle; a Down side's share goes to the others by weight, and to all
// serving sides equally when they weigh 0; sticky keys keep their side
// and a weight change moves only the keys whose range changed.
func TestSplitPicks(t *testing.T) {
	sides := splitSides(3)
	s, err := NewSplit(sides, []int{70, 20, 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest("GET", "http://x/", nil)
	count := func(s *Split, n int, r *http.Request) [3]int {
		var c [3]int
		for range n {
			c[s.choose(s.w.Load(), r)]++
		}
		return c
	}
	if c := count(s, 1000, r); c != [3]int{700, 200, 100} {
		t.Errorf("70/20/10 over 1000: %v", c)
	}
	sides[0].Upstream.SetBalance(&Balance{Down: true})
	if c := count(s, 3000, r); c[0] != 0 || c[1] != 2000 || c[2] != 1000 {
		t.Errorf("side 0 down: %v, want 0/2000/1000", c)
	}
	if err := s.SetWeights([]int{100, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if c := count(s, 1000, r); c[0] != 0 || c[1] != 500 || c[2] != 500 {
		t.Errorf("the only weighted side down: %v, want 0/500/500", c)
	}
	sides[1].Upstream.SetBalance(&Balance{Down: true})
	sides[2].Upstream.SetBalance(&Balance{Down: true})
	if c := count(s, 10, r); c[0] != 10 {
		t.Errorf("every side down: %v, want the weighted pick (side 0) to fail as a plain route", c)
	}

	sides = splitSides(2)
	st, _ := NewSplit(sides, []int{90, 10}, &HashOn{Kind: "header", Name: "X-User"})
	before := map[string]int{}
	moved := 0
	for u := range 1000 {
		r.Header.Set("X-User", fmt.Sprintf("user-%d", u))
		before[r.Header.Get("X-User")] = st.choose(st.w.Load(), r)
		if again := st.choose(st.w.Load(), r); again != before[r.Header.Get("X-User")] {
			t.Fatalf("user %d changed sides", u)
		}
	}
	if err := st.SetWeights([]int{80, 20}); err != nil {
		t.Fatal(err)
	}
	for key, side := range before {
		r.Header.Set("X-User", key)
		now := st.choose(st.w.Load(), r)
		if now != side {
			moved++
			if side != 0 || now != 1 {
				t.Errorf("%s moved from %d to %d: only 0 to 1 may move going 90/10 to 80/20", key, side, now)
			}
		}
	}
	if moved < 50 || moved > 150 {
		t.Errorf("%d of 1000 keys moved going 90/10 to 80/20, want about 100", moved)
	}
	t.Logf("90/10 to 80/20: %d of 1000 sticky keys moved", moved)
}

// BenchmarkSplitPick: the pick's cost per request (no allocation).
func BenchmarkSplitPick(b *testing.B) {
	s, _ := NewSplit(splitSides(2), []int{90, 10}, nil)
	r, _ := http.NewRequest("GET", "http://x/", nil)
	b.ReportAllocs()
	for b.Loop() {
		s.pick(r)
	}
}
