package memguard

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
)

// stepHeap is a heap source the test steps: a live heap and a cycle
// count; collect, when set, is what a forced collection does to them.
type stepHeap struct {
	live, cycles uint64
	collect      func(*stepHeap)
	forced       int
}

func newStepped(t *testing.T, h *stepHeap) *Guard {
	t.Helper()
	g, err := New(Options{Limit: 1000, SoftWatermark: 0.8, HardWatermark: 0.9,
		Heap: func() (uint64, uint64) { return h.live, h.cycles },
		Collect: func() {
			h.forced++
			if h.collect != nil {
				h.collect(h)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestReserveByClass: limit 1000, soft 800, hard 900; ceilings 800
// (sheddable), 900 (normal), 950 (critical), each counting the live heap
// and every outstanding reservation.
func TestReserveByClass(t *testing.T) {
	h := &stepHeap{live: 100}
	g := newStepped(t, h)
	g.Sample()
	for i, step := range []struct {
		n    int64
		c    Class
		fits bool
	}{
		{700, ClassSheddable, true}, // 100 + 700 = 800
		{1, ClassSheddable, false},
		{100, ClassNormal, true}, // 900
		{1, ClassNormal, false},
		{50, ClassCritical, true}, // 950
		{1, ClassCritical, false},
		{0, ClassSheddable, true}, // nothing asked, nothing taken
	} {
		if got := g.Reserve(step.n, step.c); got != step.fits {
			t.Fatalf("step %d: Reserve(%d, %v) = %v with %d reserved, want %v", i, step.n, step.c, got, g.Reserved(), step.fits)
		}
	}
	if g.Reserved() != 850 || g.RefusedReservations() != 3 {
		t.Fatalf("reserved %d, refused %d; want 850 and 3", g.Reserved(), g.RefusedReservations())
	}
	g.Release(850)
	if g.Reserved() != 0 || !g.Reserve(700, ClassSheddable) {
		t.Fatalf("after releasing everything, %d reserved and the sheddable ceiling is not free", g.Reserved())
	}
	g.Release(700)
	if c := g.Ceiling(ClassCritical); c != 950 {
		t.Errorf("critical ceiling %d, want 950", c)
	}
}

// TestReservationsRaiseAndReleaseEndPressure: the level counts the live
// heap plus reservations, so pressure rises with reservations and ends,
// at the next sample, when they are released.
func TestReservationsRaiseAndReleaseEndPressure(t *testing.T) {
	h := &stepHeap{live: 100}
	g := newStepped(t, h)
	if lvl := g.Sample(); lvl != OK {
		t.Fatalf("level %v with a small heap", lvl)
	}
	if !g.Reserve(750, ClassCritical) {
		t.Fatal("750 bytes did not fit a critical reservation")
	}
	if lvl := g.Sample(); lvl != Soft { // 850
		t.Fatalf("level %v with 100 live + 750 reserved, want soft", lvl)
	}
	if !g.Reserve(50, ClassCritical) {
		t.Fatal("50 more bytes did not fit a critical reservation")
	}
	if lvl := g.Sample(); lvl != Hard { // 900
		t.Fatalf("level %v with 100 live + 800 reserved, want hard", lvl)
	}
	g.Release(800)
	if lvl := g.Sample(); lvl != OK || g.Level() != OK {
		t.Fatalf("level %v once every reservation was released, want ok", lvl)
	}
	if h.forced != 0 {
		t.Errorf("%d collections forced while collections were not needed", h.forced)
	}
}

// TestStaleLiveHeapIsCollected: after a burst, the live heap figure still
// counts memory the finished requests held, and nothing allocates enough
// to run a collection; the guard runs one after staleSamples samples under
// pressure, and the pressure ends. While collections happen on their own,
// none is forced.
func TestStaleLiveHeapIsCollected(t *testing.T) {
	h := &stepHeap{live: 850, cycles: 7, collect: func(h *stepHeap) { h.live, h.cycles = 20, h.cycles+1 }}
	g := newStepped(t, h)
	for i := 1; i < staleSamples; i++ {
		if lvl := g.Sample(); lvl != Soft {
			t.Fatalf("sample %d: level %v, want soft", i, lvl)
		}
	}
	if h.forced != 0 {
		t.Fatalf("a collection was forced after %d samples, before staleSamples (%d)", staleSamples-1, staleSamples)
	}
	if lvl := g.Sample(); lvl != OK || h.forced != 1 || g.Collections() != 1 {
		t.Fatalf("sample %d: level %v after %d forced collections, want ok after one", staleSamples, lvl, h.forced)
	}

	// Collections of its own: the runtime's cycle count moves every
	// sample, so the reading is fresh and nothing is forced.
	h.live, h.collect = 850, nil
	for i := range 3 * staleSamples {
		h.cycles++
		if lvl := g.Sample(); lvl != Soft {
			t.Fatalf("fresh sample %d: level %v, want soft", i, lvl)
		}
	}
	if h.forced != 1 {
		t.Fatalf("%d collections forced while the runtime collected on its own, want none beyond the first", h.forced-1)
	}

	// Real pressure: a forced collection finds the memory live. The waits
	// between forced collections double, up to maxStaleSamples, and are
	// back to staleSamples once the pressure ends.
	h.collect = func(h *stepHeap) { h.cycles++ }
	h.forced = 0
	var gaps []int
	last := 0
	for i := 1; i <= 400; i++ {
		g.Sample()
		if h.forced > len(gaps) {
			gaps = append(gaps, i-last)
			last = i
		}
	}
	want := []int{staleSamples, 2 * staleSamples, 4 * staleSamples, 8 * staleSamples, 16 * staleSamples, maxStaleSamples, maxStaleSamples}
	for i, w := range want {
		if i == 0 {
			w = staleSamples - 1 // the last fresh sample counted one
		}
		if i >= len(gaps) || gaps[i] != w {
			t.Fatalf("samples between forced collections under real pressure: %v, want %v then %d", gaps, want[:5], maxStaleSamples)
		}
	}
	h.live = 10
	g.Sample()
	h.live, h.forced = 850, 0
	for range staleSamples {
		g.Sample()
	}
	if h.forced != 1 {
		t.Fatalf("after the pressure ended and came back, %d collections forced in %d samples, want 1", h.forced, staleSamples)
	}

	// The end of a storm: the back-off has grown under pressure with
	// requests holding reservations; they end, and the next forced
	// collection comes after staleSamples, not after the back-off.
	h.live = 700
	g.Reserve(100, ClassCritical) // 800: soft
	for range 200 {
		g.Sample()
	}
	if g.staleLimit != maxStaleSamples {
		t.Fatalf("back-off %d samples after long pressure, want %d", g.staleLimit, maxStaleSamples)
	}
	g.Release(100)
	h.live, h.forced = 850, 0 // what the finished requests held, not yet collected
	h.collect = func(h *stepHeap) { h.live, h.cycles = 20, h.cycles+1 }
	for range staleSamples {
		g.Sample()
	}
	if h.forced != 1 || g.Level() != OK {
		t.Fatalf("%d samples after the reservations were released: %d collections forced, level %v; want 1 and ok", staleSamples, h.forced, g.Level())
	}
}

// sink keeps an allocation reachable until the test drops it.
var sink []byte

// TestDeadHeapNotCounted: garbage (memory no longer reachable, not yet
// collected) is not in the guard's reading, while the runtime's
// objects metric, which the guard used to read, counts it.
func TestDeadHeapNotCounted(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection unless asked
	// Twice: objects with finalizers (package init's, in a test binary
	// that links more packages) are freed only by the collection after
	// the one that ran their finalizers; live0 must not count them.
	runtime.GC()
	runtime.GC()
	objects := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	const size = 64 << 20
	live0, _ := readHeap()
	sink = make([]byte, size)
	for i := 0; i < size; i += 4096 {
		sink[i] = 1
	}
	runtime.GC()
	live1, _ := readHeap()
	if live1 < live0+size {
		t.Fatalf("live heap %d MiB with 64 MiB reachable, was %d MiB", live1>>20, live0>>20)
	}
	sink = nil // garbage from now on
	objBefore := objects()
	if live2, _ := readHeap(); live2 != live1 {
		t.Fatalf("the live heap reading changed from %d to %d without a collection", live1, live2)
	}
	if objBefore < size {
		t.Fatalf("objects metric %d MiB: the dead 64 MiB is not counted there, the test proves nothing", objBefore>>20)
	}
	runtime.GC()
	if live3, _ := readHeap(); live3 > live1-size/2 {
		t.Fatalf("live heap %d MiB after the 64 MiB became garbage and a collection ran, want it gone", live3>>20)
	}
}

// TestConcurrentReservationsNeverOverrun: many goroutines reserving and
// releasing never take the total past the ceiling, and leave nothing.
func TestConcurrentReservationsNeverOverrun(t *testing.T) {
	h := &stepHeap{live: 0}
	g := newStepped(t, h)
	var wg sync.WaitGroup
	var over sync.Once
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				if g.Reserve(100, ClassNormal) {
					if r := g.Reserved(); r > g.Ceiling(ClassNormal) {
						over.Do(func() { t.Errorf("%d reserved, over the normal ceiling %d", r, g.Ceiling(ClassNormal)) })
					}
					g.Release(100)
				}
			}
		})
	}
	wg.Wait()
	if g.Reserved() != 0 {
		t.Fatalf("%d bytes left reserved", g.Reserved())
	}
}
