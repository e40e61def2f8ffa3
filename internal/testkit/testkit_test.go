package testkit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// recorder is a testing.TB whose Fatalf records instead of stopping the
// test (the helpers under test return after Fatalf).
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}
func (r *recorder) Fatal(args ...any) { r.failed, r.msg = true, fmt.Sprint(args...) }

// TestEventuallyReportsLastObservation: a condition that never holds fails
// with the last thing it observed, after the timeout and not long after.
func TestEventuallyReportsLastObservation(t *testing.T) {
	r := &recorder{TB: t}
	n := 0
	took := Eventually(r, 50*time.Millisecond, func() (bool, string) {
		n++
		return false, fmt.Sprintf("poll %d", n)
	})
	if !r.failed || !strings.Contains(r.msg, fmt.Sprintf("last observed poll %d", n)) {
		t.Fatalf("failed=%v msg=%q, want the last observation (poll %d)", r.failed, r.msg, n)
	}
	if took < 50*time.Millisecond || took > 5*time.Second {
		t.Errorf("gave up after %v, want 50 ms and a poll", took)
	}
	t.Logf("%d polls in %v", n, took)
}

// TestEventuallyReturnsOnceTrue: the state is seen on the poll after it
// comes, and a condition true at once is called once.
func TestEventuallyReturnsOnceTrue(t *testing.T) {
	calls := 0
	Eventually(t, 0, func() (bool, string) { calls++; return true, "" })
	if calls != 1 {
		t.Fatalf("%d calls for a condition true at once", calls)
	}
	calls = 0
	Until(t, 10*time.Second, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Fatalf("%d calls, want 3", calls)
	}
	r := &recorder{TB: t}
	Until(r, time.Millisecond, "godot", func() bool { return false })
	if !r.failed || !strings.Contains(r.msg, "not yet godot") {
		t.Fatalf("Until's failure %q does not name the state", r.msg)
	}
}

const page = `# HELP levee_requests_total Requests.
# TYPE levee_requests_total counter
levee_requests_total{code="200",route="a"} 3
levee_requests_total{code="502",route="b } c \"q\""} 1
levee_connections_open 0
levee_ratio 2.5e-01 1700000000000
`

// TestMetricsValueAndMissing: present series read their value (0 is a
// value), an absent one fails the test naming what the family has, and
// Absent fails on a present one.
func TestMetricsValueAndMissing(t *testing.T) {
	m := Parse(t, page)
	for series, want := range map[string]float64{
		`levee_requests_total{code="200",route="a"}`:           3,
		`levee_requests_total{code="502",route="b } c \"q\""}`: 1,
		`levee_connections_open`:                               0,
		`levee_ratio`:                                          0.25,
	} {
		if got := m.Value(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	r := &recorder{TB: t}
	if v := m.Value(r, `levee_requests_total{code="503",route="a"}`); !r.failed || v != 0 {
		t.Fatal("a missing series did not fail the test")
	}
	if !strings.Contains(r.msg, `levee_requests_total{code="200",route="a"}`) {
		t.Errorf("failure %q does not list the family's series", r.msg)
	}
	r = &recorder{TB: t}
	m.Absent(r, `levee_connections_open`)
	if !r.failed {
		t.Fatal("Absent passed on a present series")
	}
	m.Absent(t, `levee_connections_open{x="y"}`)
	if fam := m.Family("levee_requests_total"); len(fam) != 2 || fam[`{code="200",route="a"}`] != 3 {
		t.Errorf("Family = %v", fam)
	}
	for _, bad := range []string{"x{a=\"1\"", "x{a=\"1\"}1", "x nope", " 1"} {
		if _, err := ParsePage(bad); err == nil {
			t.Errorf("ParsePage(%q) took a malformed line", bad)
		}
	}
}

// TestScrapeAndGather: the same series read over HTTP and from a registry.
func TestScrapeAndGather(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kit_total", Help: "h"}, []string{"k"})
	reg.MustRegister(c)
	c.WithLabelValues("a").Add(2)
	if got := Gather(t, reg).Value(t, `kit_total{k="a"}`); got != 2 {
		t.Errorf("gathered %v, want 2", got)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(page))
	}))
	defer srv.Close()
	if got := Scrape(t, srv.URL).Value(t, `levee_requests_total{code="200",route="a"}`); got != 3 {
		t.Errorf("scraped %v, want 3", got)
	}
}

// TestClockTimers: timers fire when due, in due order, in the goroutine
// that moves the clock; a stopped one does not; Set never goes back.
func TestClockTimers(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	c := NewClock(start)
	var fired []string
	c.AfterFunc(3*time.Second, func() { fired = append(fired, "3s") })
	stop := c.AfterFunc(2*time.Second, func() { fired = append(fired, "2s stopped") })
	c.AfterFunc(time.Second, func() { fired = append(fired, "1s") })
	tm := c.NewTimer(2 * time.Second)
	if !stop() {
		t.Fatal("stop of a pending timer reported false")
	}
	c.Advance(1500 * time.Millisecond)
	if strings.Join(fired, ",") != "1s" {
		t.Fatalf("at 1.5 s fired %v", fired)
	}
	select {
	case <-tm.C():
		t.Fatal("2 s timer fired at 1.5 s")
	default:
	}
	c.Set(start.Add(5 * time.Second))
	if strings.Join(fired, ",") != "1s,3s" {
		t.Fatalf("at 5 s fired %v", fired)
	}
	if at := <-tm.C(); !at.Equal(start.Add(5 * time.Second)) {
		t.Errorf("timer delivered %v", at)
	}
	if tm.Stop() || stop() {
		t.Error("stop after firing reported true")
	}
	c.Set(start)
	if got := c.Since(start); got != 5*time.Second {
		t.Errorf("Set went backwards: %v since start", got)
	}
	now := false
	c.AfterFunc(0, func() { now = true })
	if !now || c.Pending() != 0 {
		t.Errorf("AfterFunc(0) ran=%v, %d pending", now, c.Pending())
	}
}

// TestClockSleep: Sleep records, moves the clock and never waits; a done
// context returns its error without moving it.
func TestClockSleep(t *testing.T) {
	c := NewClock(time.Unix(0, 0))
	if err := c.Sleep(context.Background(), time.Hour); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep on a done context: %v", err)
	}
	if got := c.Since(time.Unix(0, 0)); got != time.Hour {
		t.Errorf("clock moved %v, want 1h", got)
	}
	if s := c.Sleeps(); len(s) != 1 || s[0] != time.Hour {
		t.Errorf("Sleeps = %v", s)
	}
}
