package admission

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		field string
	}{
		{Options{MaxConcurrency: 0, QueueTimeout: time.Second}, "MaxConcurrency"},
		{Options{MaxConcurrency: 1, QueueTimeout: 0}, "QueueTimeout"},
		{Options{MaxConcurrency: 1, QueueTimeout: time.Second, MaxQueue: -1}, "MaxQueue"},
		{Options{MaxConcurrency: 1, QueueTimeout: time.Second, MaxPerConsumer: -2}, "MaxPerConsumer"},
		{Options{MaxConcurrency: 1, QueueTimeout: time.Second, RetryAfter: -1}, "RetryAfter"},
		{Options{MaxConcurrency: 1, QueueTimeout: time.Second, QueueTarget: -1}, "QueueTarget"},
		{Options{MaxConcurrency: 1, QueueTimeout: time.Second, QueueInterval: -1}, "QueueInterval"},
		{Options{Adaptive: &AdaptiveOptions{Min: 0, Max: 5}, QueueTimeout: time.Second}, "Adaptive.Min"},
		{Options{Adaptive: &AdaptiveOptions{Min: 5, Max: 4}, QueueTimeout: time.Second}, "Adaptive.Max"},
		{Options{Adaptive: &AdaptiveOptions{Min: 1, Max: 4, Buffer: 2}, QueueTimeout: time.Second}, "Adaptive.Buffer"},
	} {
		_, err := New(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.o, err, tc.field)
		}
	}
	if _, err := New(Options{MaxConcurrency: 1, QueueTimeout: time.Second}); err != nil {
		t.Errorf("valid options refused: %v", err)
	}
}

func wantState(t *testing.T, step string, r *req, want string) {
	t.Helper()
	if got := r.state(); got != want {
		t.Fatalf("%s: %s is %s, want %s", step, r.name, got, want)
	}
}

func wantStats(t *testing.T, step string, h *harness, inflight, queued, consumers int) {
	t.Helper()
	s := h.l.Stats()
	if s.InFlight != inflight || s.Queued != queued || s.Consumers != consumers {
		t.Fatalf("%s: inflight %d queued %d consumers %d, want %d %d %d", step, s.InFlight, s.Queued, s.Consumers, inflight, queued, consumers)
	}
}

func TestAdmitQueueFullTimeout(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrency: 2, MaxQueue: 2, QueueTimeout: 50 * time.Millisecond, MaxPerConsumer: -1})
	a1 := h.start("a1", "a", Normal)
	a2 := h.start("a2", "a", Normal)
	wantState(t, "admit to the limit", a1, "admitted")
	wantState(t, "admit to the limit", a2, "admitted")
	a3 := h.start("a3", "a", Normal)
	a4 := h.start("a4", "a", Normal)
	wantStats(t, "queue to MaxQueue", h, 2, 2, 1)
	a5 := h.start("a5", "a", Normal)
	wantState(t, "queue full, same consumer: no eviction", a5, "queue_full")

	h.clk.Advance(49 * time.Millisecond)
	h.settle()
	wantState(t, "before the timeout", a3, "pending")
	h.clk.Advance(time.Millisecond)
	h.settle()
	wantState(t, "at the timeout", a3, "queue_timeout")
	wantState(t, "at the timeout", a4, "queue_timeout")
	wantStats(t, "after timeouts", h, 2, 0, 1)

	h.release(a1, endpoint.Success)
	h.release(a2, endpoint.Success)
	wantStats(t, "all released", h, 0, 0, 0)
	s := h.l.Stats()
	if s.QueueFull != 1 || s.QueueTimeout != 2 || s.Admitted != 2 {
		t.Fatalf("counts: %+v", s)
	}
	x, _ := a5.poll()
	var ref *Refusal
	if !errors.As(x.err, &ref) || ref.RetryAfter < time.Second || ref.RetryAfter > 2*time.Second {
		t.Fatalf("refusal %v: Retry-After outside [1s, 2s]", x.err)
	}
}

func TestNoQueueRefusesAtOnce(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrency: 1, MaxQueue: 0, QueueTimeout: time.Second})
	a := h.start("a", "a", Normal)
	b := h.start("b", "b", Critical)
	wantState(t, "no queue", b, "concurrency_limit")
	h.release(a, endpoint.Abandoned)
	wantStats(t, "released", h, 0, 0, 0)
}

func TestCancelRemovesWaiter(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrency: 1, MaxQueue: 4, QueueTimeout: time.Second})
	a := h.start("a", "a", Normal)
	b := h.start("b", "b", Normal)
	c := h.start("c", "c", Normal)
	wantStats(t, "queued", h, 1, 2, 3)
	h.cancel(b)
	wantState(t, "cancelled", b, context.Canceled.Error())
	wantStats(t, "cancelled waiter removed", h, 1, 1, 2)
	h.release(a, endpoint.Success)
	wantState(t, "handoff skips the cancelled", c, "admitted")
	h.release(c, endpoint.Success)
	wantStats(t, "done", h, 0, 0, 0)
	if s := h.l.Stats(); s.Canceled != 1 {
		t.Fatalf("Canceled = %d", s.Canceled)
	}
}

// TestHandoffOrder pins the service order: priority class, then round
// robin across consumers, then FIFO within a consumer.
func TestHandoffOrder(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrency: 1, MaxQueue: 16, QueueTimeout: time.Second, MaxPerConsumer: -1})
	hold := h.start("hold", "x", Normal)
	var queued []*req
	for _, s := range []struct {
		name, consumer string
		p              Priority
	}{
		{"a-n1", "a", Normal},
		{"a-n2", "a", Normal},
		{"a-n3", "a", Normal},
		{"b-n1", "b", Normal},
		{"c-s1", "c", Sheddable},
		{"a-c1", "a", Critical},
		{"b-n2", "b", Normal},
		{"c-n1", "c", Normal},
		{"b-c1", "b", Critical},
	} {
		queued = append(queued, h.start(s.name, s.consumer, s.p))
	}
	want := []string{"a-c1", "b-c1", "a-n1", "b-n1", "c-n1", "a-n2", "b-n2", "a-n3", "c-s1"}
	var got []string
	cur := hold
	for range want {
		h.release(cur, endpoint.Success)
		var next *req
		for _, r := range queued {
			if r.state() == "admitted" {
				if next != nil {
					t.Fatalf("two admitted at once: %s and %s", next.name, r.name)
				}
				next = r
			}
		}
		if next == nil {
			t.Fatalf("release after %v admitted nobody", got)
		}
		got = append(got, next.name)
		cur = next
	}
	h.release(cur, endpoint.Success)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("order %v, want %v", got, want)
	}
	wantStats(t, "done", h, 0, 0, 0)
}

func TestFullQueueEvictsLongestSubQueue(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrency: 1, MaxQueue: 4, QueueTimeout: time.Second, MaxPerConsumer: -1})
	hold := h.start("hold", "x", Normal)
	a := make([]*req, 4)
	for i := range a {
		a[i] = h.start("a", "a", Normal)
	}
	b := h.start("b", "b", Normal)
	wantState(t, "b evicts a's newest", a[3], "queue_full")
	wantState(t, "b queued", b, "pending")
	c := h.start("c", "c", Normal)
	wantState(t, "c evicts a's newest", a[2], "queue_full")
	a5 := h.start("a5", "a", Normal)
	wantState(t, "a is the longest: refused", a5, "queue_full")
	b2 := h.start("b2", "b", Normal)
	wantState(t, "b (1) < a (2): evicts a", a[1], "queue_full")
	wantState(t, "b2 queued", b2, "pending")
	for _, r := range []*req{a[0], b, c, b2} {
		wantState(t, "survivors", r, "pending")
	}
	h.clk.Advance(time.Second)
	h.settle()
	h.release(hold, endpoint.Success)
	wantStats(t, "done", h, 0, 0, 0)
}

func TestPriorities(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrency: 1, MaxQueue: 4, QueueTimeout: time.Second, MaxPerConsumer: -1})
	hold := h.start("hold", "x", Normal)
	s1 := h.start("s1", "s", Sheddable)
	s2 := h.start("s2", "s", Sheddable)
	s3 := h.start("s3", "t", Sheddable)
	wantState(t, "half full (2 of 4) is not more than half", s2, "pending")
	wantState(t, "2 of 4 queued when s3 came: queued", s3, "pending")
	s4 := h.start("s4", "t", Sheddable)
	wantState(t, "3 of 4 queued: shed", s4, "shed_priority")
	n1 := h.start("n1", "n", Normal)
	wantStats(t, "full", h, 1, 4, 4)
	c1 := h.start("c1", "c", Critical)
	// Sheddable sub-queues: s has 2, t has 1: s's newest goes.
	wantState(t, "critical evicts sheddable", s2, "queue_full")
	c2 := h.start("c2", "c", Critical)
	wantState(t, "ties go to the first in turn order", s1, "queue_full")
	c3 := h.start("c3", "c", Critical)
	wantState(t, "then the last sheddable", s3, "queue_full")
	c4 := h.start("c4", "d", Critical)
	wantState(t, "then normal", n1, "queue_full")
	n2 := h.start("n2", "n", Normal)
	wantState(t, "normal cannot evict critical", n2, "queue_full")
	c5 := h.start("c5", "e", Critical)
	wantState(t, "critical vs critical: fairness eviction", c3, "queue_full")
	for _, r := range []*req{c1, c2, c4, c5} {
		wantState(t, "criticals queued", r, "pending")
	}
	h.clk.Advance(time.Second)
	h.settle()
	h.release(hold, endpoint.Success)
	wantStats(t, "done", h, 0, 0, 0)
}

func TestConsumerLimit(t *testing.T) {
	// Default cap: limit + MaxQueue/2 = 2 + 2 = 4.
	h := newHarness(t, Options{MaxConcurrency: 2, MaxQueue: 4, QueueTimeout: time.Second})
	var rs []*req
	for range 4 {
		rs = append(rs, h.start("a", "a", Normal))
	}
	b := h.start("b", "b", Normal)
	wantState(t, "b still queues", b, "pending")
	a5 := h.start("a5", "a", Normal)
	wantState(t, "a at its cap, with b waiting", a5, "consumer_limit")
	h.clk.Advance(time.Second)
	h.settle()
	h.release(rs[0], endpoint.Success)
	h.release(rs[1], endpoint.Success)
	wantStats(t, "done", h, 0, 0, 0)
}

func TestZeroReleaseIsNoop(t *testing.T) {
	var r Release
	r.Done(endpoint.Success)
}

// TestFairnessUnderFlood: A offers 20× its fair share, B and C one request
// at a time. B and C are never refused and wait at most one turn of the
// round robin; A absorbs all refusals.
func TestFairnessUnderFlood(t *testing.T) {
	t.Run("default cap", func(t *testing.T) { testFairness(t, 0) })
	t.Run("no cap", func(t *testing.T) { testFairness(t, -1) })
}

func testFairness(t *testing.T, perConsumer int) {
	const limit, steps = 4, 300
	h := newHarness(t, Options{MaxConcurrency: limit, MaxQueue: 8, QueueTimeout: time.Second, MaxPerConsumer: perConsumer})
	var inService []*req // admitted, in admission order
	var waiting []*req
	startedAt := map[*req]int{}
	maxWait := map[string]int{}
	served := map[string]int{}
	refused := map[string]map[string]int{"a": {}, "b": {}, "c": {}}
	outB, outC := (*req)(nil), (*req)(nil)
	collect := func(step int) {
		kept := waiting[:0]
		for _, r := range waiting {
			switch st := r.state(); st {
			case "pending":
				kept = append(kept, r)
			case "admitted":
				inService = append(inService, r)
				if w := step - startedAt[r]; w > maxWait[r.consumer] {
					maxWait[r.consumer] = w
				}
			default:
				refused[r.consumer][st]++
			}
		}
		waiting = kept
	}
	issue := func(name, consumer string, step int) *req {
		r := h.start(name, consumer, Normal)
		startedAt[r] = step
		waiting = append(waiting, r)
		return r
	}
	for step := range steps {
		// Fair share is limit/3 per step's worth; A offers 20× that.
		for range 20 * limit / 3 {
			issue("a", "a", step)
		}
		if outB == nil {
			outB = issue("b", "b", step)
		}
		if outC == nil {
			outC = issue("c", "c", step)
		}
		collect(step)
		// The backend finishes its oldest request.
		if len(inService) > 0 {
			r := inService[0]
			inService = inService[1:]
			h.release(r, endpoint.Success)
			served[r.consumer]++
			if r == outB {
				outB = nil
			}
			if r == outC {
				outC = nil
			}
		}
		collect(step + 1)
	}
	for _, c := range []string{"b", "c"} {
		if len(refused[c]) != 0 {
			t.Errorf("consumer %s refused: %v", c, refused[c])
		}
		// Served within one round of the 3-consumer ring, plus the in-service
		// requests ahead of it.
		if maxWait[c] > 3 {
			t.Errorf("consumer %s waited up to %d releases", c, maxWait[c])
		}
	}
	if len(refused["a"]) == 0 {
		t.Errorf("A was never refused")
	}
	t.Logf("%d releases: served a=%d b=%d c=%d; refusals a=%v b=%v c=%v; max wait (releases) a=%d b=%d c=%d",
		steps, served["a"], served["b"], served["c"], refused["a"], refused["b"], refused["c"], maxWait["a"], maxWait["b"], maxWait["c"])
	// Drain.
	h.clk.Advance(time.Second)
	h.settle()
	collect(steps)
	for _, r := range inService {
		h.release(r, endpoint.Success)
	}
	wantStats(t, "drained", h, 0, 0, 0)
}

// TestConsumerAloneIsNotCapped: the per-consumer cap protects other
// consumers; one that is all the traffic queues and is refused for
// capacity (503 reasons), never consumer_limit.
func TestConsumerAloneIsNotCapped(t *testing.T) {
	h := newHarness(t, Options{MaxConcurrency: 1, MaxQueue: 2, QueueTimeout: time.Second, MaxPerConsumer: 1})
	first := h.start("a1", "a", Normal)
	wantState(t, "admitted", first, "admitted")
	second := h.start("a2", "a", Normal)
	wantState(t, "alone over its cap: queued", second, "pending")
	third := h.start("a3", "a", Normal)
	wantState(t, "still queued", third, "pending")
	fourth := h.start("a4", "a", Normal)
	wantState(t, "queue full: a capacity refusal", fourth, "queue_full")
	h.clk.Advance(time.Second)
	h.settle()
	h.release(first, endpoint.Success)
	wantStats(t, "done", h, 0, 0, 0)
}
