// Package admission limits the requests one upstream has in flight, queues
// the excess in a bounded, fair, prioritised queue, and refuses the rest at
// once with a stable reason and a jittered Retry-After.
//
// # Admission
//
// Acquire admits a request at once when fewer than the limit are in flight
// and nobody is queued (the fast path: one mutex acquisition, no
// allocation). Otherwise the request waits in the queue, up to QueueTimeout
// or its context's end. A Release frees a slot by handing it straight to
// the next waiter (no thundering herd: exactly one waiter wakes).
//
// # Queue order
//
// Waiters are served by priority class first (Critical, then Normal, then
// Sheddable). Within a class, consumers with waiters in that class take
// turns (round robin, one request per turn: requests are unit cost, so this
// is deficit round robin with a quantum of one). After its turn a consumer
// goes to the back of its class's ring if it still has waiters there.
//
// Within a consumer's sub-queue of one class the order is adaptive LIFO
// (Maurer, "Fail at Scale", ACM Queue 2015): first in, first out while the
// sub-queue drains, that is while its oldest waiter has waited at most
// QueueTarget; newest first once the oldest has waited longer. A queue that
// is not draining is a standing queue: its oldest requests are the ones
// whose clients are most likely to have given up, and serving them first
// would give every admitted request the whole wait. Served newest first,
// admitted requests wait about as long as a slot takes to free, and the
// surplus ages out at the back (queue_timeout), is refused at once (rule 5)
// or is evicted (rule 6).
//
// # Refusal rules, checked in this order
//
//  1. consumer_limit: the consumer already has MaxPerConsumer requests in
//     service plus queued (the proxy answers 429).
//  2. Fast path: admitted.
//  3. concurrency_limit: MaxQueue is 0, so there is no queue to wait in.
//  4. shed_priority: the request is Sheddable and more than half the queue
//     is taken (2 × queued > the queue's capacity, rule 6).
//  5. queue_full, short-wait bound: the newcomer's consumer is under
//     controlled delay (below) and its sub-queue of the newcomer's class
//     already holds as many waiters as slots are expected to free up
//     within QueueTarget (the grants out of the queue in the last
//     QueueInterval, all consumers together, scaled to QueueTarget; at
//     least one). Waiting would end in queue_timeout all the same, after
//     a timer, a parked goroutine and a wake-up: at 10x overload that was
//     nearly every refusal.
//  6. The queue is full: queued == MaxQueue, or for an adaptive limit
//     queued == what the limit serves within QueueTimeout at the last
//     window's median latency, when that is fewer (queueCapLocked: a
//     waiter beyond it could only time out). The newcomer may evict one
//     queued request, which is refused with queue_full. A victim is always
//     the request its sub-queue would serve last: the newest in FIFO
//     order, the oldest in LIFO order.
//     a. if any request of a lower priority class is queued, the last of
//     the longest sub-queue in the lowest such class (a Critical newcomer
//     evicts Sheddable before Normal; a Normal one evicts Sheddable);
//     b. else, if the newcomer's consumer has fewer requests queued in the
//     newcomer's class than the longest sub-queue of that class, the last
//     of that longest sub-queue. A flooding consumer therefore cannot push
//     others out: it loses its own requests.
//     Otherwise the newcomer is refused with queue_full. (Its own oldest
//     request is not evicted for it even in LIFO order: at a full queue
//     every slot that frees is taken by the next arrival, so the newest
//     waiter is at most one grant old anyway, and replacing a waiter per
//     arrival would wake one goroutine and start one timer per refused
//     request, the cost that matters most at 10x overload.)
//  7. queue_timeout: the request waited its queue timeout without a slot.
//     A context that ends first returns ctx.Err() instead (not a refusal).
//
// # Controlled delay
//
// A queue absorbs bursts; under sustained overload it only adds latency
// to every admitted request while the surplus is refused anyway. So the
// queue timeout is QueueTimeout only while the consumer's own sub-queue
// has been non-empty for less than QueueInterval; once it has stayed
// non-empty that long (the consumer is sending more than its share, all
// the time), or while one of its queued requests was refused (timed out
// or evicted) less than QueueInterval ago, its new waiters wait at most
// QueueTarget. The second rule keeps the short wait through a moment when
// the flooder's sub-queue happens to drain (a pause of its client, a burst
// of releases), which would otherwise give the next interval's waiters
// the whole QueueTimeout. This is the controlled delay of Facebook's request queues (Maurer, "Fail at Scale",
// ACM Queue 2015, after CoDel), kept per consumer so that a flood shortens
// only the flooding consumer's waits: a consumer whose requests come one
// at a time empties its sub-queue at every grant and keeps QueueTimeout.
//
// Finding the longest sub-queue (rule 6) walks the consumers with waiters
// in one class: at most MaxQueue of them, and only when the queue is full.
// Every other queue operation is O(1): waiters are in intrusive doubly
// linked lists, so a waiter that times out unlinks itself.
//
// # Bounded state
//
// A consumer's record exists only while it has requests in service or
// queued, so at most InFlight + Queued records exist (≤ the highest limit in
// force while those requests were admitted + MaxQueue). Up to
// maxFreeConsumers spare records are kept for reuse, so a new consumer on
// the fast path does not allocate.
//
// # Locking
//
// All mutable state is in Limiter.mu; helpers that need it held end in
// Locked. Refusal counters are atomics. A waiter blocks on its own
// channel (buffered, so the waker never blocks) and a timer, both
// allocated only on the slow path.
package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

// Reason is the stable code of a refusal, used in levee's JSON refusal body
// and the reason label of its metrics.
type Reason string

const (
	ReasonConcurrencyLimit Reason = "concurrency_limit" // at the limit, no queue configured
	ReasonQueueFull        Reason = "queue_full"        // queue full, or evicted from it
	ReasonQueueTimeout     Reason = "queue_timeout"     // waited QueueTimeout
	ReasonShedPriority     Reason = "shed_priority"     // sheddable with the queue over half full
	ReasonConsumerLimit    Reason = "consumer_limit"    // the consumer's MaxPerConsumer is reached (429)
)

var reasons = [...]Reason{ReasonConcurrencyLimit, ReasonQueueFull, ReasonQueueTimeout, ReasonShedPriority, ReasonConsumerLimit}

const (
	rConcurrency = iota
	rQueueFull
	rQueueTimeout
	rShed
	rConsumer
)

// Refusal is the error Acquire returns when it refuses a request. Refusals
// are shared and read-only: do not modify one. Find it with errors.As.
type Refusal struct {
	Reason Reason
	// RetryAfter is when the client should try again, spread uniformly
	// (in jitterSteps steps) over [Options.RetryAfter, 2×Options.RetryAfter]
	// so refused clients do not come back in lockstep.
	RetryAfter time.Duration
}

func (r *Refusal) Error() string { return "admission refused: " + string(r.Reason) }

// jitterSteps is the resolution of Retry-After jitter. Refusals are
// precomputed for each reason and step, so refusing does not allocate;
// HTTP's Retry-After has whole seconds anyway.
const jitterSteps = 16

// Controlled-delay defaults (see the package doc): Facebook's published
// values.
const (
	defaultQueueTarget   = 5 * time.Millisecond
	defaultQueueInterval = 100 * time.Millisecond
)

// Options configure a Limiter.
type Options struct {
	// MaxConcurrency is the static limit on requests in flight, >= 1.
	// Ignored (may be 0) when Adaptive is set.
	MaxConcurrency int
	// Adaptive, when not nil, replaces MaxConcurrency with a limit found
	// from measured latency (see AdaptiveOptions).
	Adaptive *AdaptiveOptions
	// MaxQueue is the most requests waiting at once across all consumers,
	// >= 0. 0 means no queue: at the limit a request is refused at once
	// with concurrency_limit (and fairness across consumers then only
	// comes from MaxPerConsumer).
	MaxQueue int
	// QueueTimeout is the longest a request waits in the queue, > 0.
	QueueTimeout time.Duration
	// QueueTarget is the longest wait, under controlled delay, of a
	// consumer whose sub-queue has been non-empty for QueueInterval (see
	// the package doc). Default 5ms; never more than QueueTimeout.
	QueueTarget time.Duration
	// QueueInterval is how long a consumer's sub-queue must stay non-empty
	// before its waits are cut to QueueTarget. Default 100ms.
	QueueInterval time.Duration
	// MaxPerConsumer caps one consumer's requests in service plus queued.
	// 0 means limit + MaxQueue/2 (with the current limit): one consumer can
	// use every slot when nobody else wants them, but never more than half
	// the queue. A smaller cap (the textbook limit/2) refuses a lone
	// client half the capacity, which is wrong when every request comes
	// through one consumer key (a CDN's address). -1 means no cap.
	MaxPerConsumer int
	// RetryAfter is the low end of a refusal's Retry-After; refusals carry
	// a value spread over [RetryAfter, 2×RetryAfter]. Default 1s.
	RetryAfter time.Duration
	// Clock is the time source. nil means the real clock.
	Clock Clock
	// Rand returns uniform random numbers for jitter. nil means
	// math/rand/v2.Uint64. Must be safe for concurrent use.
	Rand func() uint64
}

// Limiter is one upstream's concurrency limiter. Safe for concurrent use.
// The zero value is not usable; use New.
type Limiter struct {
	static         int // 0 when adaptive
	maxQueue       int
	queueTimeout   time.Duration
	queueTarget    time.Duration
	queueInterval  int64 // ns
	maxPerConsumer int
	clock          Clock
	epoch          time.Time
	rand           func() uint64
	refusals       [len(reasons)][jitterSteps]Refusal

	limit    atomic.Int64 // mirror of the enforced limit, for Limit()
	admitted atomic.Uint64
	canceled atomic.Uint64
	refused  [len(reasons)]atomic.Uint64

	mu struct {
		sync.Mutex
		limit     int // enforced limit
		inflight  int
		queued    int
		consumers map[string]*consumer
		free      []*consumer
		// rings[c] lists the consumers with waiters in class c, in turn
		// order; classLen[c] counts those waiters.
		rings    [numClasses]ring
		classLen [numClasses]int
		gradient *gradient // nil for a static limit
		// Grants out of the queue, counted per QueueInterval window: the
		// rate that bounds a short-wait sub-queue (shortBoundLocked).
		grantWin   int64 // the current window's start
		grantCount int   // grants in the current window
		grantPrev  int   // grants in the last whole window
	}
}

// New validates o and returns a Limiter. The error names every bad field.
func New(o Options) (*Limiter, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Adaptive == nil {
		if o.MaxConcurrency < 1 {
			bad("MaxConcurrency: must be >= 1, got %d", o.MaxConcurrency)
		}
	} else {
		a := o.Adaptive
		if a.Min < 1 {
			bad("Adaptive.Min: must be >= 1, got %d", a.Min)
		}
		if a.Max < a.Min {
			bad("Adaptive.Max: must be >= Adaptive.Min (%d), got %d", a.Min, a.Max)
		}
		if a.Initial != 0 && (a.Initial < a.Min || a.Initial > a.Max) {
			bad("Adaptive.Initial: must be 0 or within Min..Max (%d..%d), got %d", a.Min, a.Max, a.Initial)
		}
		if a.Window < 0 {
			bad("Adaptive.Window: must be >= 0, got %v", a.Window)
		}
		if a.MinSamples < 0 {
			bad("Adaptive.MinSamples: must be >= 0, got %d", a.MinSamples)
		}
		if a.Buffer < 0 || a.Buffer > 1 {
			bad("Adaptive.Buffer: must be in [0, 1], got %v", a.Buffer)
		}
		if a.ProbeInterval < 0 {
			bad("Adaptive.ProbeInterval: must be >= 0, got %v", a.ProbeInterval)
		}
		if a.ProbeSamples < 0 {
			bad("Adaptive.ProbeSamples: must be >= 0, got %d", a.ProbeSamples)
		}
	}
	if o.MaxQueue < 0 {
		bad("MaxQueue: must be >= 0, got %d", o.MaxQueue)
	}
	if o.QueueTimeout <= 0 {
		bad("QueueTimeout: must be > 0, got %v", o.QueueTimeout)
	}
	if o.QueueTarget < 0 {
		bad("QueueTarget: must be >= 0, got %v", o.QueueTarget)
	}
	if o.QueueInterval < 0 {
		bad("QueueInterval: must be >= 0, got %v", o.QueueInterval)
	}
	if o.MaxPerConsumer < -1 {
		bad("MaxPerConsumer: must be >= -1, got %d", o.MaxPerConsumer)
	}
	if o.RetryAfter < 0 {
		bad("RetryAfter: must be >= 0, got %v", o.RetryAfter)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("admission options: %w", errors.Join(errs...))
	}
	l := &Limiter{
		maxQueue:       o.MaxQueue,
		queueTimeout:   o.QueueTimeout,
		queueTarget:    cmp.Or(o.QueueTarget, defaultQueueTarget),
		queueInterval:  int64(cmp.Or(o.QueueInterval, defaultQueueInterval)),
		maxPerConsumer: o.MaxPerConsumer,
		clock:          o.Clock,
		rand:           o.Rand,
	}
	l.queueTarget = min(l.queueTarget, l.queueTimeout)
	if l.clock == nil {
		l.clock = realClock{}
	}
	if l.rand == nil {
		l.rand = rand.Uint64
	}
	l.epoch = l.clock.Now()
	ra := o.RetryAfter
	if ra == 0 {
		ra = time.Second
	}
	for i, r := range reasons {
		for j := range jitterSteps {
			l.refusals[i][j] = Refusal{Reason: r, RetryAfter: ra + ra*time.Duration(j)/(jitterSteps-1)}
		}
	}
	l.mu.consumers = make(map[string]*consumer)
	if o.Adaptive != nil {
		l.mu.gradient = newGradient(*o.Adaptive)
		l.mu.limit = l.mu.gradient.current()
	} else {
		l.static = o.MaxConcurrency
		l.mu.limit = o.MaxConcurrency
	}
	l.limit.Store(int64(l.mu.limit))
	return l, nil
}

// Limit returns the limit in force now.
func (l *Limiter) Limit() int { return int(l.limit.Load()) }

func (l *Limiter) nanos() int64 { return int64(l.clock.Now().Sub(l.epoch)) }

func (l *Limiter) setLimitLocked(n int) {
	if n != l.mu.limit {
		l.mu.limit = n
		l.limit.Store(int64(n))
	}
}

// Acquire admits a request from consumer (an app id or a client address)
// at priority p. On admission it returns a Release whose Done must be
// called exactly once. Otherwise it returns a *Refusal, or ctx.Err() when
// ctx ended while the request waited. It blocks only while queued: at most
// QueueTimeout.
//
// If a slot is handed over at the moment the queue timeout fires, the
// admission wins. If it is handed over as ctx ends, the slot is passed on
// (as Done(endpoint.Abandoned)) and ctx.Err() is returned.
func (l *Limiter) Acquire(ctx context.Context, consumerKey string, p Priority) (Release, error) {
	adaptive := l.static == 0
	var now int64
	if adaptive {
		now = l.nanos()
	}
	l.mu.Lock()
	c := l.mu.consumers[consumerKey]
	if i := l.capRefusalLocked(c); i != admit {
		l.mu.Unlock()
		return Release{}, l.refuse(i)
	}
	if l.mu.inflight < l.mu.limit && l.mu.queued == 0 {
		if c == nil {
			c = l.newConsumerLocked(consumerKey)
		}
		l.grantLocked(c)
		l.mu.Unlock()
		l.admitted.Add(1)
		return Release{l: l, c: c, start: now}, nil
	}
	queueCap, i := l.queueRefusalLocked(p)
	if i != admit {
		l.mu.Unlock()
		return Release{}, l.refuse(i)
	}
	if err := ctx.Err(); err != nil {
		l.mu.Unlock()
		l.canceled.Add(1)
		return Release{}, err
	}
	if !adaptive {
		now = l.nanos() // the queue path: the clock is read here only
	}
	w, t, i := l.queueLocked(c, consumerKey, p.class(), queueCap, now)
	l.mu.Unlock()
	if w == nil {
		return Release{}, l.refuse(i)
	}
	return l.await(ctx, w, t)
}

// admit is the refusal index of a request that is not refused.
const admit = -1

// capRefusalLocked is Acquire's first step: the refusal of a request from
// c (nil: a consumer that holds nothing) at its per-consumer cap, or admit.
func (l *Limiter) capRefusalLocked(c *consumer) int {
	held := 0
	if c != nil {
		held = c.inflight + c.queued
	}
	// The cap protects the other consumers: a consumer that is all the
	// traffic is not capped (refusing it would only turn away work nobody
	// else wants, or pass a capacity refusal off as the client's fault).
	if limit := l.perConsumerLocked(); limit < 0 || held < limit || len(l.mu.consumers) <= 1 {
		return admit
	}
	// At its cap. When the limiter itself has no room either (every slot
	// busy and no queue), say so: that is the truer answer (503,
	// capacity) than blaming the consumer (429).
	if l.maxQueue == 0 && l.mu.inflight >= l.mu.limit {
		return rConcurrency
	}
	return rConsumer
}

// queueRefusalLocked is the step before queueing a request at priority p
// (no slot is free): the queue's size now, and the refusal when there is
// no queue or p is Sheddable and the queue is over half full, else admit.
func (l *Limiter) queueRefusalLocked(p Priority) (queueCap, i int) {
	if l.maxQueue == 0 {
		return 0, rConcurrency
	}
	queueCap = l.queueCapLocked()
	if p == Sheddable && 2*l.mu.queued > queueCap {
		return queueCap, rShed
	}
	return queueCap, admit
}

// queueLocked queues a request from consumerKey (c, nil when it holds
// nothing) in class cl at now, evicting a victim when the queue holds
// queueCap, and starts its timer: QueueTimeout, or QueueTarget under
// controlled delay. w is nil when the request is refused instead, for
// reason i.
func (l *Limiter) queueLocked(c *consumer, consumerKey string, cl, queueCap int, now int64) (w *waiter, t Timer, i int) {
	// Controlled delay (see the package doc): a consumer whose sub-queue
	// has stood for QueueInterval, or that was refused a queued request
	// less than QueueInterval ago, waits at most QueueTarget.
	short := c != nil && ((c.queued > 0 && now-c.busySince >= l.queueInterval) ||
		(c.lastShed != 0 && now-c.lastShed < l.queueInterval))
	if short && c.q[cl].n >= l.shortBoundLocked(now) {
		// More waiters than the slots that free up within QueueTarget:
		// the newcomer would only wait out its timer.
		return nil, nil, rQueueFull
	}
	if l.mu.queued >= queueCap {
		v := l.victimLocked(c, cl, now)
		if v == nil {
			return nil, nil, rQueueFull
		}
		c = l.evictLocked(v, c, now)
	}
	if c == nil {
		c = l.newConsumerLocked(consumerKey)
	}
	w = &waiter{c: c, class: cl, enq: now, ch: make(chan struct{}, 1)}
	if c.queued == 0 {
		c.busySince = now
	}
	timeout := l.queueTimeout
	if short {
		timeout = l.queueTarget
	}
	// The timer is made under the lock, before the waiter is visible, so a
	// test that sees it queued and then advances a fake clock fires it.
	t = l.clock.NewTimer(timeout)
	l.enqueueLocked(w)
	return w, t, admit
}

// evictLocked refuses the queued v (queue_full) to make room for a
// newcomer from c, and returns c, or nil when the eviction dropped it.
func (l *Limiter) evictLocked(v *waiter, c *consumer, now int64) *consumer {
	l.removeLocked(v)
	v.c.lastShed = max(1, now)
	v.state = evicted
	v.ch <- struct{}{}
	if vc := v.c; vc.inflight == 0 && vc.queued == 0 {
		// A Critical newcomer may evict its own consumer's last
		// Sheddable waiter: c is then gone and is made anew by the caller.
		l.dropConsumerLocked(vc)
		if vc == c {
			return nil
		}
	}
	return c
}

// await is Acquire's last step: it waits until the queued w is granted a
// slot or evicted, its timer t fires, or ctx ends, and returns the result.
func (l *Limiter) await(ctx context.Context, w *waiter, t Timer) (Release, error) {
	var cancelled bool
	select {
	case <-w.ch:
	case <-t.C():
	case <-ctx.Done():
		cancelled = true
	}
	t.Stop()

	c := w.c
	l.mu.Lock()
	switch w.state {
	case granted:
		l.mu.Unlock()
		l.admitted.Add(1)
		r := Release{l: l, c: c, start: w.start}
		if cancelled {
			r.Done(endpoint.Abandoned)
			l.canceled.Add(1)
			return Release{}, ctx.Err()
		}
		return r, nil
	case evicted:
		l.mu.Unlock()
		return Release{}, l.refuse(rQueueFull)
	}
	l.removeLocked(w)
	if !cancelled {
		c.lastShed = max(1, l.nanos())
	}
	if c.inflight == 0 && c.queued == 0 {
		l.dropConsumerLocked(c)
	}
	l.mu.Unlock()
	if cancelled {
		l.canceled.Add(1)
		return Release{}, ctx.Err()
	}
	return Release{}, l.refuse(rQueueTimeout)
}

// queueCapLocked is how many requests the queue holds now: MaxQueue, or,
// for an adaptive limit, as many as the limit serves within QueueTimeout
// at the last window's median latency if that is fewer (at least 1).
// Beyond that a waiter could only time out: at the start of an overload,
// before controlled delay engages, a queue of 256 at a limit of 28 and a
// latency of 28 ms held 200 clients for the whole QueueTimeout each, and
// a client that opens connections for its waiting requests ran away.
// A static limit keeps MaxQueue: its owner chose the queue knowing the
// upstream, and finding the latency would cost it a clock read per request.
func (l *Limiter) queueCapLocked() int {
	g := l.mu.gradient
	if g == nil || g.lastRTT == 0 {
		return l.maxQueue
	}
	// In floating point: limit × QueueTimeout may not fit in an int64.
	n := math.Ceil(float64(l.mu.limit) * float64(l.queueTimeout) / float64(g.lastRTT))
	if n >= float64(l.maxQueue) {
		return l.maxQueue
	}
	return max(1, int(n))
}

func (l *Limiter) refuse(i int) error {
	l.refused[i].Add(1)
	return &l.refusals[i][l.rand()%jitterSteps]
}

// perConsumerLocked is the per-consumer cap now; -1 means none.
func (l *Limiter) perConsumerLocked() int {
	switch {
	case l.maxPerConsumer > 0:
		return l.maxPerConsumer
	case l.maxPerConsumer < 0:
		return -1
	}
	return max(1, l.mu.limit+l.maxQueue/2)
}
