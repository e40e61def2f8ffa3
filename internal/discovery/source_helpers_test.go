package discovery

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// collector records a source's Events with their arrival times. deliver is
// called from the source's Run goroutine; tests read from theirs.
type collector struct {
	mu     sync.Mutex
	events []Event
	times  []time.Time
	// inDeliver counts concurrent deliver calls, to catch a source that
	// delivers from two goroutines.
	inDeliver int
	overlap   bool
	notify    chan struct{}
}

func newCollector() *collector { return &collector{notify: make(chan struct{}, 1)} }

func (c *collector) deliver(ev Event) {
	c.mu.Lock()
	c.inDeliver++
	if c.inDeliver > 1 {
		c.overlap = true
	}
	c.events = append(c.events, ev)
	c.times = append(c.times, time.Now())
	c.inDeliver--
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *collector) snapshot() ([]Event, []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...), append([]time.Time(nil), c.times...)
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

// waitEvent waits up to timeout for an event at index >= from that
// satisfies ok, and returns its index and arrival time.
func (c *collector) waitEvent(t *testing.T, from int, timeout time.Duration, what string, ok func(Event) bool) (int, time.Time) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		evs, times := c.snapshot()
		for i := from; i < len(evs); i++ {
			if ok(evs[i]) {
				return i, times[i]
			}
		}
		select {
		case <-c.notify:
		case <-deadline.C:
			t.Fatalf("no event %s within %v; got %d events: %s", what, timeout, len(evs), describe(evs))
		}
	}
}

func describe(evs []Event) string {
	s := ""
	for i, ev := range evs {
		if ev.Err != nil {
			s += "\n  " + strconv.Itoa(i) + ": err " + ev.Err.Error()
			continue
		}
		s += "\n  " + strconv.Itoa(i) + ":"
		for _, in := range ev.Update.Instances {
			s += " " + in.Address
		}
		for _, r := range ev.Update.Rejected {
			s += " !" + r.Key + "(" + string(r.Reason) + ")"
		}
	}
	return s
}

// addrs lists an Event's instance addresses.
func addrs(ev Event) []string {
	var out []string
	for _, in := range ev.Update.Instances {
		out = append(out, in.Address)
	}
	return out
}

func hasAddrs(ev Event, want ...string) bool {
	if ev.Err != nil {
		return false
	}
	got := addrs(ev)
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// runSource runs s until the test ends, then checks that Run returned nil
// promptly after cancellation and that deliver was never called
// concurrently.
func runSource(t *testing.T, s Source) *collector {
	t.Helper()
	c := newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, c.deliver) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after cancellation, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return within 10s of cancellation")
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.overlap {
			t.Errorf("deliver was called concurrently")
		}
	})
	return c
}

// checkLeaks verifies, after every cleanup registered later has run (the
// source stopped, clients closed, etcd stopped), that no goroutine is left.
func checkLeaks(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}
