package discovery

import (
	"fmt"
	"sync"
	"testing"
)

func TestDeduperOncePerProblem(t *testing.T) {
	var d Deduper
	p := Problem{Upstream: "video", Address: "10.0.0.1:80", Reason: ReasonNotANumber, Raw: `"abc"`}
	if !d.First(p) {
		t.Fatal("first sighting not reported")
	}
	for poll := range 100 {
		if d.First(p) {
			t.Fatalf("poll %d logged again", poll)
		}
	}
	for _, q := range []Problem{
		{Upstream: "audio", Address: p.Address, Reason: p.Reason, Raw: p.Raw},
		{Upstream: p.Upstream, Address: "10.0.0.2:80", Reason: p.Reason, Raw: p.Raw},
		{Upstream: p.Upstream, Address: p.Address, Reason: ReasonNegative, Raw: p.Raw},
		{Upstream: p.Upstream, Address: p.Address, Reason: p.Reason, Raw: `"abd"`},
	} {
		if !d.First(q) {
			t.Errorf("distinct problem %+v reported as seen", q)
		}
	}
}

// TestDeduperBounded: memory stays within capacity; a problem that keeps
// recurring among fewer than capacity/2 others is never logged twice; one
// pushed out by many others is logged again.
func TestDeduperBounded(t *testing.T) {
	d := NewDeduper(64)
	hot := Problem{Upstream: "video", Reason: ReasonBadAddress, Raw: `"x"`}
	d.First(hot)
	for i := range 10_000 {
		if !d.First(Problem{Upstream: "video", Address: fmt.Sprint(i), Reason: ReasonNegative}) {
			t.Fatalf("new problem %d reported as seen", i)
		}
		if i%16 == 0 && d.First(hot) {
			t.Fatalf("recurring problem forgotten at %d", i)
		}
		if d.Len() > 64 {
			t.Fatalf("Len = %d > capacity", d.Len())
		}
	}
	if !d.First(Problem{Upstream: "video", Address: "0", Reason: ReasonNegative}) {
		t.Fatal("a problem pushed out long ago is still remembered")
	}
	var z Deduper
	for i := range 5000 {
		z.First(Problem{Address: fmt.Sprint(i)})
	}
	if z.Len() > DefaultDedupeCapacity {
		t.Fatalf("zero Deduper holds %d", z.Len())
	}
}

func TestDeduperConcurrent(t *testing.T) {
	d := NewDeduper(128)
	var wg sync.WaitGroup
	firsts := make([]int, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if d.First(Problem{Address: fmt.Sprint(i)}) {
					firsts[g]++
				}
			}
		}()
	}
	wg.Wait()
	if n := firsts[0] + firsts[1] + firsts[2] + firsts[3]; n != 50 {
		t.Fatalf("%d first sightings of 50 problems", n)
	}
}
