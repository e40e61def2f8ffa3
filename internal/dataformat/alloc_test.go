package dataformat

import (
	"encoding/json"
	"io"
	"testing"
	"time"
)

// benchRows are the rows of the benchmarks and the memory tests: (int64,
// string, float64, time.Time, nil), boxed once here so that what is
// measured is the encoder, not the caller's boxing.
var benchCols = []string{"id", "name", "total", "created_at", "note"}

func benchRows(n int) [][]any {
	rows := make([][]any, n)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range rows {
		rows[i] = []any{int64(1000000 + i), "customer name é " + string(rune('a'+i%26)), float64(i) * 1.25, base.Add(time.Duration(i) * 1234567 * time.Microsecond), nil}
	}
	return rows
}

// TestRowAllocatesNothing: in steady state Row allocates nothing per row,
// in every format and for every value type.
func TestRowAllocatesNothing(t *testing.T) {
	rows := benchRows(64)
	cols := append(append([]string{}, benchCols...), "flag", "blob", "doc")
	for i := range rows {
		rows[i] = append(rows[i], i%2 == 0, []byte("some bytes"), json.RawMessage(`{"k": [1, 2]}`))
	}
	for _, f := range Formats {
		w, err := NewWriter(f, io.Discard, mustColumns(t, cols), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows { // warm the buffers
			_ = w.Row(r)
		}
		i := 0
		avg := testing.AllocsPerRun(5000, func() {
			if err := w.Row(rows[i%len(rows)]); err != nil {
				t.Fatal(err)
			}
			i++
		})
		if avg > allocSlack {
			t.Errorf("%v: %.3f allocations per row", f, avg)
		}
		_ = w.Finish(Tail{})
	}
}

// TestSmallAnswerAllocations: a whole 20-row answer (an indexed lookup)
// costs one allocation, the Writer itself: the columns are escaped once
// per route and the buffer comes from a pool.
func TestSmallAnswerAllocations(t *testing.T) {
	rows := benchRows(20)
	cols := mustColumns(t, benchCols)
	for _, f := range Formats {
		avg := testing.AllocsPerRun(200, func() {
			w, err := NewWriter(f, io.Discard, cols, Limits{MaxRows: 1000, MaxBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if err := w.Row(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Finish(Tail{NextCursor: "abc"}); err != nil {
				t.Fatal(err)
			}
		})
		if avg > 1+allocSlack {
			t.Errorf("%v: %.2f allocations per 20-row answer", f, avg)
		}
	}
}

func BenchmarkWriter(b *testing.B) {
	rows := benchRows(1024)
	for _, f := range Formats {
		b.Run(f.String(), func(b *testing.B) {
			w, err := NewWriter(f, io.Discard, mustColumns(b, benchCols), Limits{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := w.Row(rows[i%len(rows)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			_ = w.Finish(Tail{})
		})
	}
}

// BenchmarkMillionRows is one whole answer of 1M rows per op: what the
// issue's NDJSON target measures, less the database and the network.
func BenchmarkMillionRows(b *testing.B) {
	const n = 1_000_000
	rows := benchRows(1024)
	for _, f := range Formats {
		b.Run(f.String(), func(b *testing.B) {
			cols := mustColumns(b, benchCols)
			b.ReportAllocs()
			for b.Loop() {
				w, err := NewWriter(f, io.Discard, cols, Limits{})
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < n; i++ {
					if err := w.Row(rows[i%len(rows)]); err != nil {
						b.Fatal(err)
					}
				}
				_ = w.Finish(Tail{})
			}
			b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
