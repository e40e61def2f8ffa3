package telemetry

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-gw/levee/internal/testkit"
)

func TestTraceIDOf(t *testing.T) {
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, c := range []struct {
		in, want string
	}{
		{"00-" + tid + "-00f067aa0ba902b7-01", tid},
		{"00-" + tid + "-00f067aa0ba902b7-00", tid},
		{"01-" + tid + "-00f067aa0ba902b7-01-later-fields", tid}, // a later version may add fields
		{"01-" + tid + "-00f067aa0ba902b7-01", tid},
		{"00-" + tid + "-00f067aa0ba902b7-01-extra", ""}, // version 00 is exactly 55 bytes
		{"01-" + tid + "-00f067aa0ba902b7-01x", ""},
		{"ff-" + tid + "-00f067aa0ba902b7-01", ""},
		{"00-" + strings.ToUpper(tid) + "-00f067aa0ba902b7-01", ""},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"00-" + tid + "-0000000000000000-01", ""},
		{"00-" + tid + "-00f067aa0ba902b7-0g", ""},
		{"00_" + tid + "-00f067aa0ba902b7-01", ""},
		{"00-" + tid[:31] + "-00f067aa0ba902b7-01", ""},
		{"", ""},
	} {
		if got := TraceIDOf(c.in); got != c.want {
			t.Errorf("TraceIDOf(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzTraceIDOf(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		id := TraceIDOf(s)
		if id == "" {
			return
		}
		// Whatever it accepts is a 32-digit lowercase hex id, not all
		// zero, taken from its place in s.
		if len(id) != 32 || !lowerHex(id) || allZero(id) || s[3:35] != id {
			t.Fatalf("TraceIDOf(%q) = %q", s, id)
		}
	})
}

// lowerHex and allZero check what FuzzTraceIDOf accepts.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	return strings.Count(s, "0") == len(s)
}

func TestAppendQueryRedacts(t *testing.T) {
	redact := []string{"token", "api_key"}
	for _, c := range []struct{ in, want string }{
		{"a=1&token=s3cret&b=2", "a=1&token=REDACTED&b=2"},
		{"TOKEN=s3cret", "TOKEN=REDACTED"},
		{"%74oken=s3cret;api_key=k&api%5Fkey=k2", "%74oken=REDACTED;api_key=REDACTED&api%5Fkey=REDACTED"},
		{"token", "token"}, // no value to hide
		{"tokens=keep&x=token", "tokens=keep&x=token"},
		{"a=\"q\"\\", `a=\"q\"\\`},
		{"&&token=&", "&&token=REDACTED&"},
	} {
		got := string(appendQuery(nil, c.in, redact))
		if got != `"`+c.want+`"` {
			t.Errorf("appendQuery(%q) = %s, want %q", c.in, got, c.want)
		}
	}
}

// FuzzAppendQuery: the query is always valid JSON, and no value of a
// redacted key survives (the key "k" is redacted; its values are marked
// with "SECRET", which no other part of the input may hold).
func FuzzAppendQuery(f *testing.F) {
	f.Add("a=1&k=SECRET&b=2")
	f.Add("K=SECRET;%6b=SECRET")
	f.Add(strings.Repeat("x=1&", 600) + "k=SECRET")
	f.Fuzz(func(t *testing.T, q string) {
		b := appendQuery(nil, q, []string{"k"})
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q encoded as %q: not JSON: %v", q, b, err)
		}
		if len(got) > 3*maxLoggedString {
			t.Fatalf("query of %d bytes logged as %d", len(q), len(got))
		}
		// Count the secrets the input shows outside redacted pairs.
		visible := 0
		for _, pair := range strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' }) {
			if k, _, ok := strings.Cut(pair, "="); !ok || !redactedKey(k, []string{"k"}) {
				visible += strings.Count(pair, "SECRET")
			}
		}
		if strings.Count(got, "SECRET") > visible {
			t.Fatalf("%q logged as %q: a redacted value leaked", q, got)
		}
	})
}

func TestAccessLogSampling(t *testing.T) {
	for _, c := range []struct {
		rate     float64
		want2xx  bool
		wantRest bool
	}{{0, false, true}, {1, true, true}} {
		a, err := NewAccessLog(AccessOptions{Writer: os.Stderr, Sample2xx: c.rate}, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			for _, st := range []int{200, 204, 299} {
				if a.sampled(st) != c.want2xx {
					t.Fatalf("rate %v: status %d kept = %v", c.rate, st, !c.want2xx)
				}
			}
			for _, st := range []int{101, 304, 404, 499, 502} {
				if !a.sampled(st) {
					t.Fatalf("rate %v: status %d dropped", c.rate, st)
				}
			}
		}
	}
	// A rate between keeps about that share (10,000 draws at 0.25: the
	// bounds are more than 10 standard deviations out).
	a, _ := NewAccessLog(AccessOptions{Writer: os.Stderr, Sample2xx: 0.25}, prometheus.NewRegistry())
	kept := 0
	for range 10_000 {
		if a.sampled(200) {
			kept++
		}
	}
	if kept < 2000 || kept > 3000 {
		t.Errorf("rate 0.25 kept %d of 10000", kept)
	}
}

// TestAccessLogReopen: lines go to the file; after it is renamed and
// Reopen is called (what SIGUSR1 does), new lines go to a new file at the
// path and none is lost.
func TestAccessLogReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	a, err := NewAccessLog(AccessOptions{Path: path, Sample2xx: 1}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Run(); close(done) }()
	a.Log(&AccessEntry{RequestID: "before", Status: 200})
	waitFor(t, func() bool { return strings.Contains(readFile(path), `"before"`) })
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	a.Reopen()
	waitFor(t, func() bool { return a.reopened() == 1 })
	a.Log(&AccessEntry{RequestID: "after", Status: 200})
	a.Close()
	<-done
	if old, cur := readFile(path+".1"), readFile(path); !strings.Contains(old, `"before"`) || strings.Contains(old, `"after"`) ||
		!strings.Contains(cur, `"after"`) || strings.Contains(cur, `"before"`) {
		t.Errorf("rotated file %q, new file %q", old, cur)
	}
}

func TestAccessLogFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewAccessLog(AccessOptions{Path: filepath.Join(dir, "missing", "a.log")}, prometheus.NewRegistry()); err == nil {
		t.Error("a file in a missing directory opened")
	}
	// A reopen that fails keeps writing to the file open before.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "a.log")
	a, err := NewAccessLog(AccessOptions{Path: path, Sample2xx: 1}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Run(); close(done) }()
	if err := os.Rename(sub, sub+".gone"); err != nil {
		t.Fatal(err)
	}
	a.Reopen()
	waitFor(t, func() bool { return a.reopened() == 1 })
	a.Log(&AccessEntry{RequestID: "kept", Status: 200})
	a.Close()
	<-done
	if got := readFile(filepath.Join(sub+".gone", "a.log")); !strings.Contains(got, `"kept"`) {
		t.Errorf("after a failed reopen the old file holds %q", got)
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testkit.Until(t, 10*time.Second, "the condition", cond)
}
