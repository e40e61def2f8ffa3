// Giving a slot back: Release.Done, and the dispatch that hands a freed
// slot straight to the next waiter (class order, consumer turns, LIFO or
// FIFO under controlled delay).

package admission

import (
	"github.com/levee-gw/levee/internal/endpoint"
)

// Release is an admitted request's slot. Call Done exactly once, with the
// outcome, when the request ends; calling it twice corrupts the counts. The
// zero Release's Done does nothing.
type Release struct {
	l     *Limiter
	c     *consumer
	start int64 // ns on the limiter's clock, adaptive limiters only
}

// Done frees the slot, hands it to the next waiter if any, and feeds the
// adaptive limit the request's latency when o is a sample: Success (the
// upstream answered) or Failure (it failed, timed out or answered 503: a
// congestion signal; a window of mostly failures halves the limit).
// NotSent and Abandoned (the request never reached the upstream, or the
// client went away) say nothing about the upstream and give no sample. o is
// endpoint.Outcome, the request path's one outcome vocabulary. It does not
// block beyond a short critical section.
func (r Release) Done(o endpoint.Outcome) {
	l := r.l
	if l == nil {
		return
	}
	var now int64
	adaptive := l.static == 0
	if adaptive {
		now = l.nanos()
	}
	l.mu.Lock()
	if !adaptive && l.mu.queued > 0 {
		now = l.nanos() // dispatch orders the queue by age
	}
	c := r.c
	c.inflight--
	l.mu.inflight--
	if adaptive && (o == endpoint.Success || o == endpoint.Failure) {
		if l.mu.gradient.sample(now, r.start, o == endpoint.Failure, l.rand, l.mu.inflight) {
			l.setLimitLocked(l.mu.gradient.current())
		}
	}
	l.dispatchLocked(now)
	if c.inflight == 0 && c.queued == 0 {
		l.dropConsumerLocked(c)
	}
	l.mu.Unlock()
}

func (l *Limiter) grantLocked(c *consumer) {
	c.inflight++
	l.mu.inflight++
	if g := l.mu.gradient; g != nil {
		g.observeInflight(l.mu.inflight)
	}
}

// dispatchLocked hands free slots to waiters: highest class first, round
// robin over consumers within it, adaptive LIFO within a consumer. now is
// the time (ns on the limiter's clock); it stamps the admitted requests'
// start.
func (l *Limiter) dispatchLocked(now int64) {
	for l.mu.queued > 0 && l.mu.inflight < l.mu.limit {
		var w *waiter
		for cl := range numClasses {
			if c := l.mu.rings[cl].head; c != nil {
				w = l.firstLocked(&c.q[cl], now)
				break
			}
		}
		c := w.c
		l.removeLocked(w)
		if c.q[w.class].n > 0 { // its turn is over: to the back of the ring
			l.ringRemoveLocked(w.class, c)
			l.ringPushLocked(w.class, c)
		}
		l.grantLocked(c)
		w.state = granted
		w.start = now
		w.ch <- struct{}{}
		l.countGrantLocked(now)
	}
}

// countGrantLocked counts a grant out of the queue in the QueueInterval
// windows shortBoundLocked reads.
func (l *Limiter) countGrantLocked(now int64) {
	iv := l.queueInterval
	if d := now - l.mu.grantWin; d >= iv {
		// A window has ended; one that ran long (no grant for a while)
		// is scaled to a whole interval's worth.
		l.mu.grantPrev = int(int64(l.mu.grantCount) * iv / d)
		l.mu.grantCount, l.mu.grantWin = 0, now
	}
	l.mu.grantCount++
}

// shortBoundLocked is how many waiters a consumer's short-wait sub-queue
// may hold: the grants out of the queue expected within QueueTarget (from
// the last window's count, all consumers together, so a generous bound
// for any one of them), at least 1. Beyond it a newcomer is refused at
// once: waiting would cost a timer, a parked goroutine and a wake-up, and
// end in queue_timeout all the same. At a backend of 20 slots × 20 ms (1,000
// grants a second) and the default 5 ms target, the bound is 5.
func (l *Limiter) shortBoundLocked(now int64) int {
	iv := l.queueInterval
	prev := l.mu.grantPrev
	if d := now - l.mu.grantWin; d >= iv {
		prev = int(int64(l.mu.grantCount) * iv / d) // the current window has ended
	}
	return max(1, int((int64(prev)*int64(l.queueTarget)+iv-1)/iv))
}
