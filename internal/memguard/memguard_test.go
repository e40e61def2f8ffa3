package memguard

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee-gw/levee/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Limit: 0, SoftWatermark: 0.8, HardWatermark: 0.9},
		{Limit: 100, SoftWatermark: 0.9, HardWatermark: 0.8},
		{Limit: 100, SoftWatermark: 0, HardWatermark: 0.9},
		{Limit: 100, SoftWatermark: 0.8, HardWatermark: 1.1},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestLevels is a step table: limit 1000 bytes, soft 800, hard 900,
// hysteresis 20.
func TestLevels(t *testing.T) {
	g, err := New(Options{Limit: 1000, SoftWatermark: 0.8, HardWatermark: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		heap uint64
		want Level
	}{
		{100, OK}, {799, OK}, {800, Soft}, {850, Soft}, {900, Hard}, {990, Hard},
		{885, Hard},  // within hysteresis of hard
		{879, Soft},  // below hard − slack, above soft
		{785, Soft},  // within hysteresis of soft
		{779, OK},    // below soft − slack
		{1200, Hard}, // straight up
		{10, OK},     // straight down
	} {
		if got := g.Observe(step.heap); got != step.want || g.Level() != step.want {
			t.Fatalf("step %d: heap %d → %v, want %v", i, step.heap, got, step.want)
		}
	}
}

// TestStartSamples: the sampling goroutine follows the heap source and
// stops cleanly.
func TestStartSamples(t *testing.T) {
	var heap atomic.Uint64
	g, err := New(Options{Limit: 1 << 40, SoftWatermark: 0.5, HardWatermark: 0.75, Interval: time.Millisecond,
		Heap: func() (uint64, uint64) { return heap.Load(), 0 }, Collect: func() {}})
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	defer g.Stop()
	heap.Store(1 << 39)
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		l := g.Level()
		return l == Soft, fmt.Sprintf("level %v after the heap passed the soft watermark", l)
	})
	heap.Store(0)
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		l := g.Level()
		return l == OK, fmt.Sprintf("level %v after the heap fell", l)
	})
}

func TestReadHeapIsLive(t *testing.T) {
	runtime.GC()
	if live, cycles := readHeap(); live == 0 || cycles == 0 {
		t.Fatalf("runtime/metrics reported live heap %d after %d collections", live, cycles)
	}
}
