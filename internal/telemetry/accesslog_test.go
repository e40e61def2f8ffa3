package telemetry

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAccessLogWritesOneJSONLinePerEntry(t *testing.T) {
	var out syncBuffer
	a, err := NewAccessLog(AccessOptions{Writer: &out, Sample2xx: 1}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Run(); close(done) }()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a.Log(&AccessEntry{Time: at, RequestID: "r1", Client: "127.0.0.1:5", Method: "GET", Host: "h", Path: "/a\"b\\c\n\x00é\xff",
		Proto: "HTTP/1.1", Status: 200, Route: "r", Upstream: "u", Endpoint: "127.0.0.1:9", BytesOut: 42, Duration: 1500 * time.Microsecond})
	a.Log(&AccessEntry{Time: at, RequestID: "r2", Status: 404, Reason: "no_route"})
	a.Close()
	<-done
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), out.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatalf("line %q: %v", lines[0], err)
	}
	if first["path"] != "/a\"b\\c\n\x00é\ufffd" || first["status"] != float64(200) || first["duration_ms"] != 1.5 ||
		first["time"] != "2026-11-30T12:00:00Z" || first["bytes_out"] != float64(42) {
		t.Errorf("first line decoded to %v", first)
	}
	if _, ok := first["reason"]; ok {
		t.Error("reason present on an upstream answer")
	}
	var second map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil || second["reason"] != "no_route" {
		t.Errorf("second line %q: %v", lines[1], err)
	}
}

// blockingWriter never returns until released, like a stalled log pipe.
type blockingWriter struct{ release chan struct{} }

func (b *blockingWriter) Write(p []byte) (int, error) { <-b.release; return len(p), nil }

// TestAccessLogNeverBlocksAndCountsDrops: with the writer stalled, Log
// returns at once and the lines beyond the queue are counted as dropped.
func TestAccessLogNeverBlocksAndCountsDrops(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	a, err := NewAccessLog(AccessOptions{Writer: w, Sample2xx: 1}, reg)
	if err != nil {
		t.Fatal(err)
	}
	// Run is not started: nothing drains the queue.
	const extra = 100
	for range QueueLen + extra {
		a.Log(&AccessEntry{Status: 200})
	}
	if got := testutil.ToFloat64(a.dropped); got != extra {
		t.Errorf("dropped = %v, want %d", got, extra)
	}
	done := make(chan struct{})
	go func() { a.Run(); close(done) }()
	close(w.release)
	a.Close()
	<-done
	a.Log(&AccessEntry{Status: 200}) // after Close: dropped or queued, never a panic
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted"`, "back\\slash", "\x00\x1f\x7f", "é", "\xff\xfe", "\u2028", strings.Repeat("x", 3000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := AppendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q encoded as %q: not JSON: %v", s, b, err)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("decoded string not valid UTF-8")
		}
		want := s
		if len(want) > maxLoggedString {
			want = want[:maxLoggedString]
		}
		if utf8.ValidString(want) && got != want {
			t.Fatalf("round trip of %q gave %q", want, got)
		}
	})
}
