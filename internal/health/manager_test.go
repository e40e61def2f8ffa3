package health

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/testkit"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testEndpoints(n int) []*endpoint.Endpoint {
	eps := make([]*endpoint.Endpoint, n)
	for i := range eps {
		eps[i] = endpoint.New(fmt.Sprintf("10.0.%d.%d:80", i/256, i%256), 100)
	}
	return eps
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Until(t, 20*time.Second, what, cond)
}

func states(m *Manager, name string) map[State]int {
	v, _ := m.View(name)
	out := map[State]int{}
	for _, e := range v.Endpoints {
		out[e.State]++
	}
	return out
}

// TestManagerBoundsConcurrentChecks: 1,000 endpoints whose checks each take
// 20 ms never have more than Workers checks running at once, and every
// endpoint still gets checked.
func TestManagerBoundsConcurrentChecks(t *testing.T) {
	var running, peak atomic.Int64
	var mu sync.Mutex
	checked := map[string]bool{}
	m := New(Options{
		Logger: quietLogger(), OnChange: func([]string) {}, Workers: 8,
		Probe: func(ctx context.Context, addr string, c *CheckOptions) error {
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			defer running.Add(-1)
			mu.Lock()
			checked[addr] = true
			mu.Unlock()
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		},
	})
	eps := testEndpoints(1000)
	m.Apply("u", UpstreamOptions{Check: &CheckOptions{TCP: true, Interval: 100 * time.Millisecond, Timeout: 50 * time.Millisecond, HealthyAfter: 1, UnhealthyAfter: 1}}, eps)
	m.Start()
	defer m.Stop()
	waitUntil(t, "every endpoint checked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(checked) == len(eps)
	})
	if p := peak.Load(); p > 8 || p < 2 {
		t.Fatalf("peak concurrent checks = %d, want 2..8", p)
	}
	t.Logf("1000 endpoints, 8 workers: peak %d concurrent checks", peak.Load())
}

// TestManagerActiveAndOutlier: a failing check marks an endpoint unhealthy
// and OnChange names its upstream; failures on the request path eject, at
// most max_ejection_percent; the ejection ends after its time and the
// endpoint slow-starts for its window. On a fake clock the test steps: every
// duration is asserted in the clock's time, never the machine's.
func TestManagerActiveAndOutlier(t *testing.T) {
	var bad, named sync.Map
	clk := newFakeClock(t0)
	m := New(Options{
		Logger: quietLogger(), Clock: clk,
		OnChange: func(ups []string) {
			for _, u := range ups {
				named.Store(u, true)
			}
		},
		Probe: func(ctx context.Context, addr string, c *CheckOptions) error {
			if _, ok := bad.Load(addr); ok {
				return errors.New("status 503")
			}
			return nil
		},
	})
	checked := testEndpoints(3)
	m.Apply("checked", UpstreamOptions{Check: &CheckOptions{HTTPPath: "/", Interval: 20 * time.Millisecond, Timeout: 10 * time.Millisecond, HealthyAfter: 2, UnhealthyAfter: 2}}, checked)
	passive := testEndpoints(4)
	oo := &OutlierOptions{ConsecutiveGatewayFailures: 3, BaseEjectionTime: 300 * time.Millisecond, MaxEjectionTime: time.Second, MaxEjectionPercent: 50}
	const slow = 500 * time.Millisecond
	m.Apply("passive", UpstreamOptions{Outlier: oo, SlowStart: slow}, passive)
	m.Start()
	defer m.Stop()
	clk.quiet = managerQuiet(m, nil)

	const step = 5 * time.Millisecond
	bad.Store(checked[1].Address, true)
	stepUntil(t, clk, step, "unhealthy", func() bool { return states(m, "checked")[Unhealthy] == 1 })
	bad.Delete(checked[1].Address)
	stepUntil(t, clk, step, "healthy again", func() bool { return states(m, "checked")[Healthy] == 3 })

	// Three of four fail on the request path: two may be ejected (50 %).
	for _, e := range passive[:3] {
		for range 3 {
			e.Begin()
			e.EndStatus(503)
		}
	}
	waitUntil(t, "two ejected", func() bool { return states(m, "passive")[Ejected] == 2 })
	// The third keeps failing: each run of three trips the manager, which
	// takes the trip (resetting the run) and still ejects no third.
	run := &passive[2].Stats.GatewayFailuresInARow
	for i := range 7 {
		waitUntil(t, "the run's trip taken", func() bool { return run.Load() == 0 })
		if n := states(m, "passive")[Ejected]; n != 2 {
			t.Fatalf("after %d runs: %d ejected, want 2 (max_ejection_percent 50 of 4)", i, n)
		}
		for range 3 {
			passive[2].Begin()
			passive[2].End(endpoint.Failure)
		}
	}
	waitUntil(t, "the last run's trip taken", func() bool { return run.Load() == 0 })
	p := m.Apply("passive", UpstreamOptions{Outlier: oo, SlowStart: slow}, passive)
	zero := 0
	for _, e := range p.Endpoints {
		if e.Weight == 0 {
			zero++
		}
	}
	if zero != 2 || p.Panic {
		t.Fatalf("plan has %d endpoints at weight 0 (panic %v), want 2", zero, p.Panic)
	}

	ejectedAt := since(t, m, "passive", Ejected)
	clk.Advance(ejectedAt.Add(oo.BaseEjectionTime - time.Millisecond).Sub(clk.Now()))
	if n := states(m, "passive")[Ejected]; n != 2 {
		t.Fatalf("1 ms before the ejection time: %d ejected, want 2", n)
	}
	stepUntil(t, clk, step, "ejection over, slow start", func() bool { return states(m, "passive")[SlowStart] == 2 })
	rampFrom := since(t, m, "passive", SlowStart)
	if d := rampFrom.Sub(ejectedAt); d < oo.BaseEjectionTime {
		t.Fatalf("ejection lasted %v, want >= %v", d, oo.BaseEjectionTime)
	}
	clk.Advance(rampFrom.Add(slow - time.Millisecond).Sub(clk.Now()))
	if n := states(m, "passive")[SlowStart]; n != 2 {
		t.Fatalf("1 ms before the slow-start window ends: %d in slow start, want 2", n)
	}
	stepUntil(t, clk, step, "slow start over", func() bool { return states(m, "passive")[Healthy] == 4 })
	v, _ := m.View("passive")
	if v.EjectionsTotal["consecutive_gateway_failures"] != 2 {
		t.Fatalf("ejections = %v", v.EjectionsTotal)
	}
	stepUntil(t, clk, step, "OnChange naming both upstreams", func() bool {
		_, a := named.Load("checked")
		_, b := named.Load("passive")
		return a && b
	})
}

// since returns when upstream name's endpoints in state s entered it (the
// latest, if they differ); it fails the test when none is in s.
func since(t *testing.T, m *Manager, name string, s State) time.Time {
	t.Helper()
	v, _ := m.View(name)
	var at time.Time
	for _, e := range v.Endpoints {
		if e.State == s && e.Since.After(at) {
			at = e.Since
		}
	}
	if at.IsZero() {
		t.Fatalf("no endpoint of %s is %s", name, s)
	}
	return at
}

// settled waits until the Manager's loop has taken every outlier signal
// sent so far and finished handling it: the signal slot is empty, and a
// kick sent after that has been taken too (the loop takes one per turn).
func settled(t *testing.T, m *Manager) {
	t.Helper()
	waitUntil(t, "signals taken", func() bool { return len(m.trip) == 0 })
	m.poke()
	waitUntil(t, "the loop's next turn", func() bool { return len(m.kick) == 0 })
}

// TestManagerStopWithoutStart and twice: no goroutine, no hang.
func TestManagerStopWithoutStart(t *testing.T) {
	m := New(Options{Logger: quietLogger(), OnChange: func([]string) {}})
	m.Stop()
	m.Stop()
	m = New(Options{Logger: quietLogger(), OnChange: func([]string) {}})
	m.Start()
	m.Stop()
	m.Stop()
}

// TestApplySlowStartsJoiners: endpoints of the first set start at full
// weight; one added later, or undrained, starts at the ramp's floor; the
// time comes from the injected clock.
func TestApplySlowStartsJoiners(t *testing.T) {
	now := t0
	m := New(Options{Logger: quietLogger(), OnChange: func([]string) {}, Clock: nowFunc(func() time.Time { return now })})
	o := UpstreamOptions{SlowStart: 10 * time.Second}
	eps := testEndpoints(3)
	eps[2].Weight = 0
	p := m.Apply("u", o, eps)
	if p.Endpoints[0].Weight != 100 || p.Endpoints[2].Weight != 0 {
		t.Fatalf("first set: %d, %d", p.Endpoints[0].Weight, p.Endpoints[2].Weight)
	}
	now = now.Add(time.Second)
	joined := append(testEndpoints(3), endpoint.New("10.9.9.9:80", 1000))
	p = m.Apply("u", o, joined)
	if w := []uint32{p.Endpoints[0].Weight, p.Endpoints[2].Weight, p.Endpoints[3].Weight}; w[0] != 100 || w[1] != 10 || w[2] != 100 {
		t.Fatalf("after join and undrain: weights %v, want [100 10 100]", w)
	}
	if p.Endpoints[3].Stats != joined[3].Stats {
		t.Fatal("a ramped endpoint must share the original's Stats")
	}
	now = now.Add(5 * time.Second)
	p = m.Apply("u", o, joined)
	if p.Endpoints[3].Weight != 500 {
		t.Fatalf("halfway: %d, want 500", p.Endpoints[3].Weight)
	}
	if s := states(m, "u"); s[SlowStart] != 2 || s[Healthy] != 2 {
		t.Fatalf("states %v", s)
	}
	now = now.Add(5 * time.Second)
	if p = m.Apply("u", o, joined); p.Endpoints[3] != joined[3] {
		t.Fatalf("after the window the endpoint itself is used, weight %d", p.Endpoints[3].Weight)
	}
}

// TestManagerEjectsRefusedAtOnce: one refused connection ejects an
// endpoint without any outlier detection block, within the ejection cap;
// the ejection ends after its base time (on a fake clock); an upstream
// without Refused ignores the mark.
func TestManagerEjectsRefusedAtOnce(t *testing.T) {
	clk := newFakeClock(t0)
	m := New(Options{Logger: quietLogger(), OnChange: func([]string) {}, Clock: clk})
	ro := &OutlierOptions{BaseEjectionTime: 300 * time.Millisecond, MaxEjectionTime: time.Second, MaxEjectionPercent: 50}
	eps := testEndpoints(4)
	m.Apply("u", UpstreamOptions{Refused: ro}, eps)
	off := testEndpoints(2)
	m.Apply("off", UpstreamOptions{}, off)
	m.Start()
	defer m.Stop()
	clk.quiet = managerQuiet(m, nil)

	now := clk.Now().UnixNano()
	eps[0].Stats.Refused(now)
	waitUntil(t, "one ejected", func() bool { return states(m, "u")[Ejected] == 1 })
	for _, e := range eps[1:] { // two more refuse: only one more may go (50 % of 4)
		e.Stats.Refused(now)
	}
	waitUntil(t, "two ejected", func() bool { return states(m, "u")[Ejected] == 2 })
	off[0].Stats.Refused(now)
	eps[3].Stats.Refused(now) // a signal to make the loop scan again
	settled(t, m)
	if n := states(m, "u")[Ejected]; n != 2 {
		t.Fatalf("%d ejected, want 2 (max_ejection_percent 50 of 4)", n)
	}
	if n := states(m, "off")[Ejected]; n != 0 {
		t.Fatalf("upstream without Refused: %d ejected", n)
	}
	v, _ := m.View("u")
	if v.EjectionsTotal["connect_refused"] != 2 {
		t.Fatalf("ejections = %v", v.EjectionsTotal)
	}
	// Re-applying the same options keeps the ejections; they end by time.
	p := m.Apply("u", UpstreamOptions{Refused: ro}, eps)
	zero := 0
	for _, e := range p.Endpoints {
		if e.Weight == 0 {
			zero++
		}
	}
	if zero != 2 {
		t.Fatalf("plan has %d endpoints at weight 0, want 2", zero)
	}
	clk.Advance(ro.BaseEjectionTime - time.Millisecond)
	if n := states(m, "u")[Ejected]; n != 2 {
		t.Fatalf("1 ms before the ejection time: %d ejected, want 2", n)
	}
	stepUntil(t, clk, time.Millisecond, "ejections over", func() bool { return states(m, "u")[Healthy] == 4 })
	if !eps[0].Stats.RefusedSince(now) || eps[0].Stats.RefusedSince(now+1) {
		t.Fatal("RefusedSince does not report the mark")
	}
}

// nowFunc is a Clock that only tells the time (for tests that call Apply
// and View without starting the Manager).
type nowFunc func() time.Time

func (f nowFunc) Now() time.Time { return f() }

func (nowFunc) AfterFunc(time.Duration, func()) func() bool { return func() bool { return true } }

// TestManagerHangingCheckTimesOut: a check that never answers ends at its
// timeout on the Manager's clock, and unhealthy_after such checks mark the
// endpoint unhealthy no sooner than (unhealthy_after-1) jittered intervals
// plus one timeout after it started hanging, and no later than
// unhealthy_after intervals plus one timeout (the gateway's real-socket
// version of this bound runs in the load step: TestActiveCheckDetectionTime).
func TestManagerHangingCheckTimesOut(t *testing.T) {
	const (
		interval       = 100 * time.Millisecond
		timeout        = 50 * time.Millisecond
		unhealthyAfter = 3
		step           = time.Millisecond
	)
	var hang atomic.Bool
	var timedOut, parked atomic.Int64
	clk := newFakeClock(t0)
	m := New(Options{
		Logger: quietLogger(), OnChange: func([]string) {}, Clock: clk,
		Probe: func(ctx context.Context, addr string, c *CheckOptions) error {
			if !hang.Load() {
				return nil
			}
			parked.Add(1)
			<-ctx.Done() // a backend that accepts and never answers
			parked.Add(-1)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) { // not Stop's cancel
				timedOut.Add(1)
				if dl, ok := ctx.Deadline(); !ok || dl.After(clk.Now()) {
					t.Errorf("check timed out before its deadline %v (now %v)", dl, clk.Now())
				}
			}
			return errors.New("timed out")
		},
	})
	eps := testEndpoints(2)
	m.Apply("u", UpstreamOptions{Check: &CheckOptions{HTTPPath: "/healthz", Interval: interval, Timeout: timeout, HealthyAfter: 1, UnhealthyAfter: unhealthyAfter}}, eps)
	m.Start()
	defer m.Stop()
	clk.quiet = managerQuiet(m, &parked)
	stepUntil(t, clk, step, "a round of checks", func() bool { return states(m, "u")[Healthy] == 2 && clk.Now().Sub(t0) >= 2*interval })

	hang.Store(true)
	took := stepUntil(t, clk, step, "unhealthy", func() bool { return states(m, "u")[Unhealthy] == 2 })
	lower := (unhealthyAfter-1)*interval*9/10 + timeout
	upper := unhealthyAfter*interval + timeout
	t.Logf("hanging checks marked unhealthy after %v on the clock (bounds %v..%v)", took, lower, upper)
	if took < lower || took > upper+2*step {
		t.Errorf("took %v on the clock, want %v..%v", took, lower, upper)
	}
	if n := timedOut.Load(); n < 2*unhealthyAfter {
		t.Errorf("%d checks ended by their timeout, want >= %d", n, 2*unhealthyAfter)
	}
}
