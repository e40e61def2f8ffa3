package telemetry

import (
	"maps"
	"slices"
	"testing"
)

// TestTopNRule: the busiest unlabelled keys are promoted while labels are
// free (ties by key, idle keys included), a label sticks, a promoted key
// starts at 0 with its past kept in "other", and a key that leaves or is
// made anew frees its label while "other" never goes down.
func TestTopNRule(t *testing.T) {
	src := map[string]*int{}
	entry := func(key string, n uint64) TopNEntry {
		if src[key] == nil {
			src[key] = new(int)
		}
		return TopNEntry{Key: key, Source: src[key], Counts: []uint64{n}, Rank: n}
	}
	top := NewTopN(2, 1)
	own, other, needed := top.Scrape([]TopNEntry{entry("c", 0), entry("b", 0), entry("a", 0)})
	if got := slices.Sorted(maps.Keys(own)); !slices.Equal(got, []string{"a", "b"}) || other[0] != 0 || !needed {
		t.Fatalf("idle keys: labelled %v, other %v (needed %v); want a and b by key order, other 0 and needed", got, other, needed)
	}
	own, other, _ = top.Scrape([]TopNEntry{entry("a", 1), entry("b", 2), entry("c", 9)})
	if own["a"][0] != 1 || own["b"][0] != 2 || other[0] != 9 {
		t.Fatalf("labels stick: %v other %v", own, other)
	}
	// a leaves: d, the busiest unlabelled (a newcomer), is promoted at 0;
	// a's own count ends with its series, d's past joins "other".
	own, other, _ = top.Scrape([]TopNEntry{entry("b", 2), entry("c", 9), entry("d", 20)})
	if _, ok := own["c"]; ok || own["d"][0] != 0 || own["b"][0] != 2 || other[0] != 29 {
		t.Fatalf("after a left: %v other %v; want b 2, d at 0, other 29", own, other)
	}
	// b is made anew (new counters, same key): what it had in "other"
	// (nothing: it was labelled from 0) stays; its label is free and c,
	// busier than the new b, takes it at 0.
	src["b"] = nil
	own, other, _ = top.Scrape([]TopNEntry{entry("b", 1), entry("c", 10), entry("d", 25)})
	if _, ok := own["b"]; ok || own["c"][0] != 0 || own["d"][0] != 5 || other[0] != 31 {
		t.Fatalf("after b made anew: %v other %v; want c 0, d 5, other 31 (c's 10, d's 20 before promotion, the new b's 1)", own, other)
	}
}
