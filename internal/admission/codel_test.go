// Tests of controlled delay: adaptive LIFO, the short-wait bound, the
// shed-driven switch and the adaptive queue cap.

package admission

import (
	"fmt"
	"github.com/levee-gw/levee/internal/endpoint"
	"testing"
	"time"
)

// TestAdaptiveLIFO: a consumer's sub-queue is served first in, first out
// while its oldest waiter has waited at most QueueTarget, newest first once
// it has waited longer; a victim is the request its sub-queue would serve
// last, and a newcomer never evicts its own consumer's waiters.
func TestAdaptiveLIFO(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrency: 1, MaxQueue: 3, QueueTimeout: time.Second,
		QueueTarget: 5 * time.Millisecond, QueueInterval: 10 * time.Second, MaxPerConsumer: -1})
	hold := h.start("hold", "x", Normal)
	a1 := h.start("a1", "a", Normal) // t = 0
	h.clk.Advance(5 * time.Millisecond)
	h.settle()
	a2 := h.start("a2", "a", Normal) // t = 5ms
	h.release(hold, endpoint.Success)
	wantState(t, "oldest waited exactly QueueTarget: FIFO", a1, "admitted")
	wantState(t, "oldest waited exactly QueueTarget: FIFO", a2, "pending")
	a3 := h.start("a3", "a", Normal)
	a4 := h.start("a4", "a", Normal) // the queue is full: a2 a3 a4
	h.clk.Advance(time.Millisecond)
	h.settle()
	a5 := h.start("a5", "a", Normal)
	wantState(t, "FIFO: the newcomer would be served last", a5, "queue_full")
	h.clk.Advance(5 * time.Millisecond) // a2 has waited 6ms
	h.settle()
	a6 := h.start("a6", "a", Normal)
	wantState(t, "LIFO: a newcomer of the longest sub-queue is refused", a6, "queue_full")
	b1 := h.start("b1", "b", Normal)
	wantState(t, "b evicts what a would serve last: its oldest", a2, "queue_full")
	wantState(t, "b queued", b1, "pending")
	h.release(a1, endpoint.Success)
	wantState(t, "a's turn, newest first", a4, "admitted")
	wantState(t, "a's turn, newest first", a3, "pending")
	h.release(a4, endpoint.Success)
	wantState(t, "b's turn", b1, "admitted")
	h.release(b1, endpoint.Success)
	wantState(t, "a's last", a3, "admitted")
	h.release(a3, endpoint.Success)
	wantStats(t, "done", h, 0, 0, 0)
	if s := h.l.Stats(); s.QueueFull != 3 || s.QueueTimeout != 0 {
		t.Fatalf("refusals: queue_full %d, queue_timeout %d; want 3 and 0", s.QueueFull, s.QueueTimeout)
	}
}

// TestControlledDelay: once a consumer's sub-queue has stayed non-empty
// for QueueInterval, its new waiters wait at most QueueTarget; a consumer
// whose sub-queue was empty keeps QueueTimeout, and so does the flooding
// consumer again once its sub-queue has emptied.
func TestControlledDelay(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrency: 1, MaxQueue: 8, QueueTimeout: time.Second,
		QueueTarget: 5 * time.Millisecond, QueueInterval: 100 * time.Millisecond, MaxPerConsumer: -1})
	a0 := h.start("a0", "a", Normal)
	a1 := h.start("a1", "a", Normal) // a's sub-queue non-empty from here
	h.clk.Advance(99 * time.Millisecond)
	h.settle()
	a2 := h.start("a2", "a", Normal) // non-empty for 99ms: QueueTimeout
	h.clk.Advance(time.Millisecond)
	h.settle()
	// Non-empty for 100ms: QueueTarget, and with no grant out of the queue
	// yet, no slot is expected within it: a3 is refused at once (rule 5).
	a3 := h.start("a3", "a", Normal)
	b1 := h.start("b1", "b", Normal) // b's sub-queue was empty: QueueTimeout
	wantState(t, "short wait, nothing draining", a3, "queue_full")
	for _, r := range []*req{a1, a2, b1} {
		wantState(t, "the others wait on", r, "pending")
	}
	h.clk.Advance(500 * time.Millisecond)
	h.settle()
	for _, r := range []*req{a1, a2, b1} {
		wantState(t, "half the queue timeout", r, "pending")
	}
	h.release(a0, endpoint.Success)
	// a's oldest has waited past QueueTarget: newest first (adaptive LIFO).
	wantState(t, "a's turn, newest first", a2, "admitted")
	wantState(t, "a's turn, newest first", a1, "pending")
	h.release(a2, endpoint.Success)
	wantState(t, "b's turn", b1, "admitted")
	h.release(b1, endpoint.Success)
	wantState(t, "a again", a1, "admitted")
	// a's sub-queue is empty now: a new waiter of a gets QueueTimeout.
	h.clk.Advance(time.Second)
	a4 := h.start("a4", "a", Normal)
	h.clk.Advance(500 * time.Millisecond)
	h.settle()
	wantState(t, "a's sub-queue emptied: QueueTimeout again", a4, "pending")
	h.release(a1, endpoint.Success)
	wantState(t, "a4 served", a4, "admitted")
	h.release(a4, endpoint.Success)
	wantStats(t, "done", h, 0, 0, 0)
	if s := h.l.Stats(); s.QueueTimeout != 0 || s.QueueFull != 1 {
		t.Fatalf("refusals: %d queue_timeout, %d queue_full; want 0 and 1", s.QueueTimeout, s.QueueFull)
	}
}

// TestControlledDelayAfterShed: once a consumer's queued request was
// refused, its next waiter gets QueueTarget even if its sub-queue had
// drained meanwhile; QueueInterval after the refusal it gets QueueTimeout
// again.
func TestControlledDelayAfterShed(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrency: 1, MaxQueue: 8, QueueTimeout: 50 * time.Millisecond,
		QueueTarget: 5 * time.Millisecond, QueueInterval: 100 * time.Millisecond, MaxPerConsumer: -1})
	a0 := h.start("a0", "a", Normal)
	a1 := h.start("a1", "a", Normal)
	h.clk.Advance(50 * time.Millisecond)
	h.settle()
	wantState(t, "the first wait is QueueTimeout", a1, "queue_timeout")
	h.clk.Advance(10 * time.Millisecond)
	a2 := h.start("a2", "a", Normal) // sub-queue empty, but a refusal 10ms ago
	a2.timeout = 5 * time.Millisecond
	h.clk.Advance(5 * time.Millisecond)
	h.settle()
	wantState(t, "after a refusal: QueueTarget", a2, "queue_timeout")
	h.clk.Advance(100 * time.Millisecond) // the last refusal is 100ms old
	a3 := h.start("a3", "a", Normal)
	h.clk.Advance(40 * time.Millisecond)
	h.settle()
	wantState(t, "an interval after the last refusal: QueueTimeout", a3, "pending")
	h.release(a0, endpoint.Success)
	wantState(t, "served", a3, "admitted")
	h.release(a3, endpoint.Success)
	wantStats(t, "done", h, 0, 0, 0)
}

// TestShortWaitBound: under controlled delay a consumer's sub-queue holds
// at most the grants expected within QueueTarget (rule 5); a newcomer
// beyond that is refused at once, one within it waits QueueTarget, and a
// consumer not under controlled delay is not bounded by it.
func TestShortWaitBound(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrency: 1, MaxQueue: 64, QueueTimeout: time.Second,
		QueueTarget: 20 * time.Millisecond, QueueInterval: 100 * time.Millisecond, MaxPerConsumer: -1})
	all := []*req{h.start("a0", "a", Normal)}
	for i := 1; i <= 25; i++ {
		all = append(all, h.start(fmt.Sprintf("a%d", i), "a", Normal)) // normal mode: QueueTimeout
	}
	holder := func() *req {
		for _, r := range all {
			if r.state() == "admitted" {
				return r
			}
		}
		t.Fatal("no request holds the slot")
		return nil
	}
	bound := func() int {
		h.l.mu.Lock()
		defer h.l.mu.Unlock()
		return h.l.shortBoundLocked(h.l.nanos())
	}
	// 10 grants per 100 ms window, for two windows.
	for range 20 {
		h.clk.Advance(10 * time.Millisecond)
		h.settle()
		h.release(holder(), endpoint.Success)
	}
	if b := bound(); b != 2 { // 10 grants per 100 ms, scaled to 20 ms
		t.Fatalf("bound after 10 grants per window = %d, want 2", b)
	}
	// a's sub-queue has stood for 200 ms and holds 5: a newcomer is refused
	// at once; b, whose sub-queue is empty, queues with QueueTimeout.
	if r := h.start("a-over", "a", Normal); r.state() != "queue_full" {
		t.Fatalf("a newcomer over the bound: %s, want queue_full at once", r.state())
	}
	b1 := h.start("b1", "b", Normal)
	all = append(all, b1)
	if b1.state() != "pending" {
		t.Fatalf("b1: %s, want pending", b1.state())
	}
	// Drain a's sub-queue to one waiter (b1 takes one grant in turn).
	for a := 0; countPending(all, "a") > 1; a++ {
		if a > 10 {
			t.Fatal("a's sub-queue does not drain")
		}
		h.clk.Advance(time.Millisecond)
		h.release(holder(), endpoint.Success)
	}
	within := h.start("a-within", "a", Normal) // 1 waiter < bound 2: queued, short wait
	within.timeout = 20 * time.Millisecond
	all = append(all, within)
	h.clk.Advance(19 * time.Millisecond)
	h.settle()
	wantState(t, "within the bound, before QueueTarget", within, "pending")
	h.clk.Advance(time.Millisecond)
	h.settle()
	wantState(t, "within the bound, at QueueTarget", within, "queue_timeout")
	// No grant for a whole window: nothing is expected to drain, bound 1.
	h.clk.Advance(150 * time.Millisecond)
	h.settle()
	if b := bound(); b != 1 {
		t.Fatalf("bound with no grant for 150 ms = %d, want 1", b)
	}
	for countPending(all, "") > 0 {
		h.release(holder(), endpoint.Success)
	}
	h.release(holder(), endpoint.Success)
	wantStats(t, "done", h, 0, 0, 0)
}

func countPending(rs []*req, consumer string) int {
	n := 0
	for _, r := range rs {
		if (consumer == "" || r.consumer == consumer) && r.state() == "pending" {
			n++
		}
	}
	return n
}

// TestAdaptiveQueueCap: an adaptive limiter's queue holds only as many
// waiters as its limit serves within QueueTimeout at the last window's
// median latency (MaxQueue before the first window closes); the newcomer
// beyond is refused at once, and the Sheddable rule takes half of that.
func TestAdaptiveQueueCap(t *testing.T) {
	h := newHarness(t, Options{MaxQueue: 256, QueueTimeout: 50 * time.Millisecond, MaxPerConsumer: -1,
		Adaptive: &AdaptiveOptions{Min: 10, Max: 10, Window: 100 * time.Millisecond, MinSamples: 10, ProbeSamples: 10}})
	queueCap := func() int {
		h.l.mu.Lock()
		defer h.l.mu.Unlock()
		return h.l.queueCapLocked()
	}
	fill := func(consumer string) []*req {
		var rs []*req
		for i := range 10 {
			r := h.start(fmt.Sprintf("%s%d", consumer, i), consumer, Normal)
			wantState(t, "below the limit", r, "admitted")
			rs = append(rs, r)
		}
		return rs
	}
	// Before any window: MaxQueue. 30 waiters queue (more than the cap to come).
	held := fill("a")
	var waiting []*req
	for i := range 30 {
		waiting = append(waiting, h.start(fmt.Sprintf("b%d", i), "b", Normal))
	}
	for _, r := range waiting {
		wantState(t, "before the first window", r, "pending")
	}
	if c := queueCap(); c != 256 {
		t.Fatalf("cap before the first window = %d, want MaxQueue 256", c)
	}
	h.clk.Advance(50 * time.Millisecond)
	h.settle()
	for _, r := range held {
		h.release(r, endpoint.Success) // the probe's samples
	}
	// Round trips of 20 ms at the limit until a window has closed.
	for range 6 {
		rs := fill("c")
		h.clk.Advance(20 * time.Millisecond)
		for _, r := range rs {
			h.release(r, endpoint.Success)
		}
	}
	if c := queueCap(); c != 25 { // 10 slots × 50 ms / 20 ms
		t.Fatalf("cap after a window at 20 ms = %d, want 25", c)
	}
	held = fill("d")
	waiting = waiting[:0]
	for i := range 13 {
		waiting = append(waiting, h.start(fmt.Sprintf("e%d", i), "e", Normal))
	}
	if r := h.start("shed", "f", Sheddable); r.state() != "shed_priority" { // 2 × 13 > 25
		t.Fatalf("a Sheddable newcomer with 13 of 25 queued: %s, want shed_priority", r.state())
	}
	for i := 13; i < 25; i++ {
		waiting = append(waiting, h.start(fmt.Sprintf("e%d", i), "e", Normal))
	}
	for _, r := range waiting {
		wantState(t, "within the cap", r, "pending")
	}
	if r := h.start("over", "e", Normal); r.state() != "queue_full" {
		t.Fatalf("the 26th waiter: %s, want queue_full at once", r.state())
	}
	h.clk.Advance(50 * time.Millisecond)
	h.settle()
	for _, r := range held {
		h.release(r, endpoint.Success)
	}
}
