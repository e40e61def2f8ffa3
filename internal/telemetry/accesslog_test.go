package telemetry

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strconv"
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

// TestAccessLogNeverBlocksAndCountsDrops: with nothing writing, Log
// returns at once and the lines beyond MaxPending bytes are counted as
// dropped; then, with Run stalled in a write, too.
func TestAccessLogNeverBlocksAndCountsDrops(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	a, err := NewAccessLog(AccessOptions{Writer: w, Sample2xx: 1}, reg)
	if err != nil {
		t.Fatal(err)
	}
	// Run is not started: nothing takes the waiting lines.
	e := &AccessEntry{Status: 200}
	a.Log(e)
	line := len(a.pending) // every line of e is as long
	fit := MaxPending / line
	const extra = 100
	for range fit - 1 + extra {
		a.Log(e)
	}
	if got := testutil.ToFloat64(a.dropped); got != extra {
		t.Errorf("dropped = %v, want %d (%d-byte lines, %d fit in %d bytes)", got, extra, line, fit, MaxPending)
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

// countingWriter counts the writes it gets and keeps what was written.
type countingWriter struct {
	mu     sync.Mutex
	writes int
	buf    bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	return c.buf.Write(p)
}

// TestAccessLogBatchesWrites: lines are written in batches (each tick, or
// at FlushBytes), not one write per line as a request finishes: 2000
// lines logged one at a time reach the writer in far fewer writes, all of
// them, in order.
func TestAccessLogBatchesWrites(t *testing.T) {
	w := &countingWriter{}
	a, err := NewAccessLog(AccessOptions{Writer: w, Sample2xx: 1}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Run(); close(done) }()
	const n = 2000
	for i := range n {
		a.Log(&AccessEntry{Status: 200, RequestID: strconv.Itoa(i)})
	}
	a.Close()
	<-done
	lines := strings.Split(strings.TrimSuffix(w.buf.String(), "\n"), "\n")
	if len(lines) != n || !strings.Contains(lines[n-1], `"request_id":"1999"`) || !strings.Contains(lines[0], `"request_id":"0"`) {
		t.Fatalf("%d lines written, first %.60q, last %.60q", len(lines), lines[0], lines[len(lines)-1])
	}
	// 2000 lines of ~250 bytes: about 8 FlushBytes batches, plus ticks.
	if w.writes > n/50 {
		t.Errorf("%d lines took %d writes, want batches (at most %d)", n, w.writes, n/50)
	}
	t.Logf("%d lines in %d writes", n, w.writes)
}

// TestAppendTime: the cached-second formatting writes what
// time.RFC3339Nano does, across seconds, zones, fractions with trailing
// zeros, years of fewer and more than four digits.
func TestAppendTime(t *testing.T) {
	a, err := NewAccessLog(AccessOptions{Writer: &syncBuffer{}}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	east := time.FixedZone("east", 5*3600+30*60)
	times := []time.Time{
		time.Date(2026, 12, 2, 4, 42, 5, 0, time.UTC),
		time.Date(2026, 12, 2, 4, 42, 5, 100, time.UTC),
		time.Date(2026, 12, 2, 4, 42, 5, 120000000, time.UTC),
		time.Date(2026, 12, 2, 4, 42, 5, 999999999, time.UTC),
		time.Date(2026, 12, 2, 4, 42, 6, 1, east),
		time.Date(2026, 12, 2, 4, 42, 6, 1, time.UTC),
		time.Date(999, 1, 1, 0, 0, 0, 5, time.UTC),
		time.Date(12345, 1, 1, 0, 0, 0, 5, time.UTC),
		{},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		times = append(times, time.Unix(1.7e9+r.Int64N(1000), r.Int64N(1e9)*int64(r.IntN(2))))
	}
	for _, at := range times {
		got := string(a.appendTime(nil, at))
		if want := at.UTC().Format(time.RFC3339Nano); got != want {
			t.Fatalf("appendTime(%v) = %q, want %q", at, got, want)
		}
	}
}

// TestAppendMillis: the integer formatting writes what
// strconv.AppendFloat(µs/1000, 'f', 3) did.
func TestAppendMillis(t *testing.T) {
	ds := []time.Duration{0, 1, 999, time.Microsecond, 1500 * time.Microsecond, -1500 * time.Microsecond,
		-time.Microsecond, time.Hour, 123456789 * time.Microsecond}
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		ds = append(ds, time.Duration(r.Int64N(1<<52)-1<<51)*time.Duration(1+r.IntN(1000)))
	}
	for _, d := range ds {
		got := string(appendMillis(nil, d))
		if want := strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64); got != want {
			t.Fatalf("appendMillis(%v) = %q, want %q", d, got, want)
		}
	}
}

// BenchmarkAccessLogLine: formatting and queueing one line of a proxied
// request (the writer discards).
func BenchmarkAccessLogLine(b *testing.B) {
	a, err := NewAccessLog(AccessOptions{Writer: io.Discard, Sample2xx: 1, RedactQuery: []string{"token"}}, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Run(); close(done) }()
	defer func() { a.Close(); <-done }()
	e := &AccessEntry{RequestID: "0f8e7d6c5b4a3928", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Client: "192.0.2.1:51234",
		Method: "GET", Host: "api.example.com", Path: "/v1/orders/42", Query: "x=1&token=abc", Proto: "HTTP/1.1",
		UserAgent: "wrk", Status: 200, Route: "orders", Upstream: "orders", Endpoint: "10.0.0.7:8080", UpstreamStatus: 200,
		BytesOut: 64, Duration: 812 * time.Microsecond, Connect: 0, FirstByte: 640 * time.Microsecond, Attempts: 1}
	b.ReportAllocs()
	for b.Loop() {
		e.Time = time.Now()
		a.Log(e)
	}
}
