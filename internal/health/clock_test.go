package health

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// fakeClock is testkit's Clock (it moves only when a test calls Advance;
// timers due by then run in Advance's goroutine, in the order they are
// due), with what stepUntil needs.
type fakeClock struct {
	*testkit.Clock
	// quiet, when set, reports that whatever the clock drives has done
	// all it can at the current time; stepUntil waits for it before each
	// step, so that no step outruns the code under test.
	quiet func() bool
}

func newFakeClock(now time.Time) *fakeClock { return &fakeClock{Clock: testkit.NewClock(now)} }

// stepUntil advances c by step until cond holds, giving the Manager's
// goroutines a moment of real time after each step; it fails after 10 s of
// real time. It reports how far the clock moved. Stepping (rather than one
// jump) keeps it exact when the loop arms its timer just after a step: the
// next step fires it. With c.quiet set, the clock moves only while the
// code under test waits for it.
func stepUntil(t *testing.T, c *fakeClock, step time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	moved := time.Duration(0)
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (clock moved %v)", what, moved)
		}
		if c.quiet != nil && !c.quiet() {
			time.Sleep(100 * time.Microsecond) // polling for the state, bounded above
			continue
		}
		c.Advance(step)
		moved += step
	}
	return moved
}

// managerQuiet reports whether m has done all it can at the clock's
// current time: no signal, job, result or wake-up waiting, every check
// handed out parked in the probe (parked counts those; nil: none park),
// and two kicks taken by the loop since (so it has finished the turn that
// was under way and armed its timer again).
func managerQuiet(m *Manager, parked *atomic.Int64) func() bool {
	idle := func() bool {
		if len(m.trip)+len(m.kick)+len(m.jobs)+len(m.results)+len(m.wake) != 0 {
			return false
		}
		m.mu.Lock()
		out := int64(m.mu.outstanding)
		m.mu.Unlock()
		return parked == nil && out == 0 || parked != nil && out == parked.Load()
	}
	return func() bool {
		if !idle() {
			return false
		}
		for range 2 {
			m.poke()
			for deadline := time.Now().Add(time.Second); len(m.kick) != 0; time.Sleep(50 * time.Microsecond) {
				if time.Now().After(deadline) {
					return false
				}
			}
		}
		return idle()
	}
}

// TestFakeClockTimers: timers fire in order once due, never before, and a
// stopped one never fires.
func TestFakeClockTimers(t *testing.T) {
	c := newFakeClock(t0)
	var got []int
	c.AfterFunc(20*time.Millisecond, func() { got = append(got, 2) })
	c.AfterFunc(10*time.Millisecond, func() { got = append(got, 1) })
	stop := c.AfterFunc(15*time.Millisecond, func() { got = append(got, 9) })
	c.Advance(9 * time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	if !stop() || stop() {
		t.Fatal("stop must report true once, before the timer fires")
	}
	c.Advance(11 * time.Millisecond)
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("fired %v, want [1 2]", got)
	}
}
