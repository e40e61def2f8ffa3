package proxy

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"
)

// The cost of compression: CPU per answer (benchmarks) and the memory an
// encoder holds (TestEncoderMemory, which encoderMemory's reservations
// rest on).

// BenchmarkCompressGzip64K: the CPU of a 64 KiB JSON answer through
// levee over loopback, as is and gzip-coded at each level (ns/op is the
// whole request; the difference is the coding's cost).
func BenchmarkCompressGzip64K(b *testing.B) {
	body := jsonAnswer(64 << 10)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	for _, bc := range []struct {
		name  string
		ae    string
		level CompressLevel
	}{{"identity", "", LevelFast}, {"gzip-fast", "gzip", LevelFast}, {"gzip-default", "gzip", LevelDefault}, {"zstd-fast", "zstd", LevelFast}, {"br-fast", "br", LevelFast}} {
		b.Run(bc.name, func(b *testing.B) {
			c := defaultCompression()
			c.Level = bc.level
			f := newCompressFront(b, up, c)
			req, _ := http.NewRequest(http.MethodGet, f.url+"/bench", nil)
			if bc.ae != "" {
				req.Header.Set("Accept-Encoding", bc.ae)
			}
			var out int64
			b.ReportAllocs()
			for b.Loop() {
				resp, err := f.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != bc.ae {
					b.Fatalf("status %d, coding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
				}
				out = n
			}
			b.ReportMetric(float64(out), "wire-bytes")
		})
	}
}

// BenchmarkEncode64K: the coding alone of a 64 KiB JSON answer through a
// pooled encoder (ns/op is the CPU a request's compression costs).
func BenchmarkEncode64K(b *testing.B) {
	body := jsonAnswer(64 << 10)
	for _, e := range []Encoding{EncodingGzip, EncodingZstd, EncodingBrotli} {
		for _, l := range []CompressLevel{LevelFast, LevelDefault, LevelBest} {
			b.Run(fmt.Sprintf("%s-%d", e, l), func(b *testing.B) {
				w := &discardWriter{h: http.Header{}} // refusal_test.go
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					cw := getCompressWriter(w, e, l)
					cw.Write(body)
					if err := cw.endCoding(true); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestEncoderMemory: the heap an encoder of each coding and level holds
// after coding a 64 KiB answer stays within what is reserved for it from
// the memory budget (encoderMemory).
func TestEncoderMemory(t *testing.T) {
	body := jsonAnswer(64 << 10)
	const n = 8
	for e := EncodingZstd; e < numEncodings; e++ {
		for l := LevelFast; l < numLevels; l++ {
			// The least of three measures: another test's leftover
			// goroutine allocating meanwhile can only add to one.
			per := int64(1) << 62
			for range 3 {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				encs := make([]encoder, n)
				for i := range encs {
					encs[i] = newEncoder(e, l, io.Discard)
					encs[i].Write(body)
					encs[i].Flush()
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				per = min(per, (int64(after.HeapAlloc)-int64(before.HeapAlloc))/n)
				runtime.KeepAlive(encs)
			}
			t.Logf("%-4s level %d: %7d bytes an encoder (reserved %d)", e, l, per, encoderMemory[e][l])
			if per > encoderMemory[e][l] {
				t.Errorf("%s level %d: %d bytes an encoder, over the %d reserved", e, l, per, encoderMemory[e][l])
			}
		}
	}
}
