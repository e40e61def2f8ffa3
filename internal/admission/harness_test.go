package admission

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is testkit's Clock (it moves only when told: Advance, Set),
// its NewTimer returning this package's Timer.
type fakeClock struct{ *testkit.Clock }

func newFakeClock() *fakeClock { return &fakeClock{testkit.NewClock(time.Unix(1_000_000, 0))} }

func (f *fakeClock) NewTimer(d time.Duration) Timer { return f.Clock.NewTimer(d) }

// harness runs each Acquire in its own goroutine and lets the test wait
// until the limiter is quiescent: every goroutine still running is queued.
type harness struct {
	t       testing.TB
	l       *Limiter
	clk     *fakeClock
	timeout time.Duration
	live    atomic.Int64
	reqs    []*req
}

type req struct {
	name     string
	consumer string
	p        Priority
	cancel   context.CancelFunc
	done     chan result
	res      *result // set by poll once the result has arrived
	released bool
	started  time.Time // fake time of the Acquire
	canceled bool
	// timeout overrides the harness's queue timeout for this request (a
	// controlled-delay wait); 0 means the harness's.
	timeout time.Duration
}

type result struct {
	rel Release
	err error
}

func newHarness(t testing.TB, o Options) *harness {
	t.Helper()
	clk := newFakeClock()
	o.Clock = clk
	if o.QueueTarget == 0 {
		// Every wait is QueueTimeout, so settle knows when a waiter is due;
		// the controlled-delay tests set QueueTarget and mark the waiters
		// it shortens (req.timeout).
		o.QueueTarget = o.QueueTimeout
	}
	if o.Rand == nil {
		var n atomic.Uint64
		o.Rand = func() uint64 { return n.Add(0x9e3779b97f4a7c15) }
	}
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, l: l, clk: clk, timeout: o.QueueTimeout}
}

// start issues an Acquire and waits until it was admitted, refused or
// queued.
func (h *harness) start(name, consumer string, p Priority) *req {
	ctx, cancel := context.WithCancel(context.Background())
	r := &req{name: name, consumer: consumer, p: p, cancel: cancel, done: make(chan result, 1), started: h.clk.Now()}
	h.reqs = append(h.reqs, r)
	h.live.Add(1)
	go func() {
		rel, err := h.l.Acquire(ctx, consumer, p)
		r.done <- result{rel, err}
		h.live.Add(-1)
	}()
	h.settle()
	return r
}

// settle waits until every goroutine still in Acquire is queued, and every
// request whose queue timeout has passed or whose context was cancelled has
// its result. It polls a state; it never sleeps to decide an outcome.
func (h *harness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !h.quiet() {
		if time.Now().After(deadline) {
			h.t.Fatalf("not quiescent: %d goroutines in Acquire, %d queued", h.live.Load(), h.l.Stats().Queued)
		}
		runtime.Gosched()
	}
}

func (h *harness) quiet() bool {
	now := h.clk.Now()
	kept := h.reqs[:0]
	quiet := true
	for _, r := range h.reqs {
		if _, ok := r.poll(); ok {
			continue
		}
		kept = append(kept, r)
		to := h.timeout
		if r.timeout > 0 {
			to = r.timeout
		}
		if r.canceled || !now.Before(r.started.Add(to)) {
			quiet = false
		}
	}
	h.reqs = kept
	return quiet && h.live.Load() == int64(h.l.Stats().Queued)
}

// cancel ends r's context and waits for it to take effect.
func (h *harness) cancel(r *req) {
	r.canceled = true
	r.cancel()
	h.settle()
}

// poll returns r's result if it has one.
func (r *req) poll() (result, bool) {
	if r.res != nil {
		return *r.res, true
	}
	select {
	case x := <-r.done:
		r.res = &x
		return x, true
	default:
		return result{}, false
	}
}

// state describes r: "pending", "admitted", "released", a refusal reason,
// or an error's text.
func (r *req) state() string {
	x, ok := r.poll()
	switch {
	case !ok:
		return "pending"
	case x.err == nil && r.released:
		return "released"
	case x.err == nil:
		return "admitted"
	}
	var ref *Refusal
	if errors.As(x.err, &ref) {
		return string(ref.Reason)
	}
	return x.err.Error()
}

func (h *harness) release(r *req, o endpoint.Outcome) {
	h.t.Helper()
	x, ok := r.poll()
	if !ok || x.err != nil || r.released {
		h.t.Fatalf("release %s: state %s", r.name, r.state())
	}
	r.released = true
	x.rel.Done(o)
	h.settle()
}
