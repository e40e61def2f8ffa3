package proxy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAppCollectorTopN: the busiest apps get a label of their own, which
// sticks; the rest are summed under "other"; every series stays monotonic
// when apps are promoted or deleted.
func TestAppCollectorTopN(t *testing.T) {
	h := newTestHandler(t, nil, nil)
	mk := func(ids ...string) []*App {
		var out []*App
		for _, id := range ids {
			out = append(out, &App{ID: id})
		}
		return out
	}
	h.SwapApps(NewApps(mk("a", "b", "c"), nil, nil))
	ok := func(id string, n int) {
		for range n {
			h.Apps().App(id).counters.byClass[2].Add(1)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(h.AppCollector(1))
	scrape := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, mt := range mf.GetMetric() {
				var app, class string
				for _, l := range mt.GetLabel() {
					switch l.GetName() {
					case "app":
						app = l.GetValue()
					case "class":
						class = l.GetValue()
					}
				}
				if class == "2xx" {
					got[app] = mt.GetCounter().GetValue()
				}
			}
		}
		return got
	}
	ok("a", 1)
	ok("b", 5)
	ok("c", 2)
	if got := scrape(); got["b"] != 0 || got["other"] != 8 || len(got) != 2 {
		t.Fatalf("first scrape: %v, want b promoted at 0 and other 8", got)
	}
	ok("b", 3)
	ok("c", 10) // c is now busier, but b's label sticks (top 1)
	if got := scrape(); got["b"] != 3 || got["other"] != 18 || len(got) != 2 {
		t.Fatalf("second scrape: %v, want b 3, other 18", got)
	}
	// b is deleted: its series ends; other keeps what b had before its
	// promotion, and c, the busiest left, takes the free label.
	h.SwapApps(NewApps(mk("a", "c"), nil, h.Apps()))
	got := scrape()
	if got["c"] != 0 || got["other"] != 18 || got["b"] != 0 || len(got) != 2 {
		t.Fatalf("after deleting b: %v, want c promoted at 0 and other 18", got)
	}
	ok("a", 1)
	if got := scrape(); got["other"] != 19 {
		t.Fatalf("other %v, want 19", got["other"])
	}
}
