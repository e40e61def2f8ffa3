//go:build !race

package dataformat

import (
	"io"
	"runtime"
	"testing"
	"time"
)

// This file is built without the race detector and runs in the Makefile's
// load step (LOAD_TESTS): its bound is on memory, not time, but 3M rows
// under the race detector take a dozen seconds of a shared machine, and
// TestRowAllocatesNothing already pins the per-row cost there.

// TestMillionRowsHeap: 1M rows in each format to io.Discard allocate less
// than 4 MiB in all (runtime.MemStats.TotalAlloc, which counts every
// allocation whatever the collector does, so the bound is exact, not
// timing-dependent), and the live heap grows by less than that.
func TestMillionRowsHeap(t *testing.T) {
	const n = 1_000_000
	rows := benchRows(1024)
	for _, f := range Formats {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		w, err := NewWriter(f, io.Discard, mustColumns(t, benchCols), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := w.Row(rows[i%len(rows)]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Finish(Tail{}); err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		growth := int64(after.HeapInuse) - int64(before.HeapInuse)
		t.Logf("%v: 1M rows in %v (%.0f rows/s, not judged), %d bytes allocated, heap in use %+d bytes",
			f, elapsed.Round(time.Millisecond), n/elapsed.Seconds(), alloc, growth)
		if alloc >= 4<<20 || growth >= 4<<20 {
			t.Errorf("%v: 1M rows allocated %d bytes, heap grew %d bytes; want < 4 MiB", f, alloc, growth)
		}
	}
}
