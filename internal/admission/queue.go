// The fair queue's structures: consumers with a waiter list per class, the
// per-class rings of consumers taking turns, and the operations that keep
// them (enqueue, remove, pick first/last, pick a victim to evict). Every
// function here needs Limiter.mu held.

package admission

// maxFreeConsumers bounds the spare consumer records kept for reuse.
const maxFreeConsumers = 1024

// consumer is one consumer's live state. It exists while the consumer has
// requests in service or queued.
type consumer struct {
	key      string
	inflight int
	queued   int // sum of q[c].n
	// busySince is when queued last went from 0 to 1 (ns on the limiter's
	// clock); meaningful only while queued > 0.
	busySince int64
	// lastShed is when a queued request of this consumer was last refused
	// (queue_timeout, or evicted: queue_full); 0 for never.
	lastShed int64
	q        [numClasses]wlist
	link     [numClasses]struct{ prev, next *consumer } // in mu.rings[c] iff q[c].n > 0
}

type ring struct{ head, tail *consumer }

type wlist struct {
	head, tail *waiter
	n          int
}

type waitState uint8

const (
	waiting waitState = iota
	granted
	evicted
)

// waiter is one queued request. state and start are written under
// Limiter.mu before ch is signalled.
type waiter struct {
	c          *consumer
	class      int
	prev, next *waiter
	state      waitState
	enq        int64 // when it was queued, ns on the limiter's clock
	start      int64
	ch         chan struct{}
}

// lifoLocked reports whether q is a standing queue, served newest first:
// its oldest waiter has waited longer than QueueTarget.
func (l *Limiter) lifoLocked(q *wlist, now int64) bool {
	return q.head != nil && now-q.head.enq > int64(l.queueTarget)
}

// firstLocked is the waiter of a non-empty q served first.
func (l *Limiter) firstLocked(q *wlist, now int64) *waiter {
	if l.lifoLocked(q, now) {
		return q.tail
	}
	return q.head
}

// lastLocked is the waiter of a non-empty q served last.
func (l *Limiter) lastLocked(q *wlist, now int64) *waiter {
	if l.lifoLocked(q, now) {
		return q.head
	}
	return q.tail
}

// victimLocked picks the queued request a newcomer of consumer c (nil if
// new) in class cl evicts from a full queue (rule 6 in the package doc), or
// nil.
func (l *Limiter) victimLocked(c *consumer, cl int, now int64) *waiter {
	for lower := numClasses - 1; lower > cl; lower-- {
		if l.mu.classLen[lower] > 0 {
			return l.lastLocked(&l.longestLocked(lower).q[lower], now)
		}
	}
	if l.mu.classLen[cl] == 0 {
		return nil
	}
	longest := l.longestLocked(cl)
	mine := 0
	if c != nil {
		mine = c.q[cl].n
	}
	if mine < longest.q[cl].n {
		return l.lastLocked(&longest.q[cl], now)
	}
	return nil
}

// longestLocked returns the consumer with the most waiters in class cl
// (the first in turn order on ties). O(consumers waiting in cl) ≤ MaxQueue.
func (l *Limiter) longestLocked(cl int) *consumer {
	var best *consumer
	for c := l.mu.rings[cl].head; c != nil; c = c.link[cl].next {
		if best == nil || c.q[cl].n > best.q[cl].n {
			best = c
		}
	}
	return best
}

func (l *Limiter) enqueueLocked(w *waiter) {
	c, cl := w.c, w.class
	q := &c.q[cl]
	w.prev, w.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	q.n++
	if q.n == 1 {
		l.ringPushLocked(cl, c)
	}
	c.queued++
	l.mu.queued++
	l.mu.classLen[cl]++
}

// removeLocked unlinks a waiting w; its consumer leaves the class's ring
// when w was its last waiter there, and otherwise keeps its place.
func (l *Limiter) removeLocked(w *waiter) {
	c, cl := w.c, w.class
	q := &c.q[cl]
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = nil, nil
	q.n--
	c.queued--
	l.mu.queued--
	l.mu.classLen[cl]--
	if q.n == 0 {
		l.ringRemoveLocked(cl, c)
	}
}

func (l *Limiter) ringPushLocked(cl int, c *consumer) {
	r := &l.mu.rings[cl]
	c.link[cl].prev, c.link[cl].next = r.tail, nil
	if r.tail != nil {
		r.tail.link[cl].next = c
	} else {
		r.head = c
	}
	r.tail = c
}

func (l *Limiter) ringRemoveLocked(cl int, c *consumer) {
	r := &l.mu.rings[cl]
	lk := &c.link[cl]
	if lk.prev != nil {
		lk.prev.link[cl].next = lk.next
	} else {
		r.head = lk.next
	}
	if lk.next != nil {
		lk.next.link[cl].prev = lk.prev
	} else {
		r.tail = lk.prev
	}
	lk.prev, lk.next = nil, nil
}

func (l *Limiter) newConsumerLocked(key string) *consumer {
	var c *consumer
	if n := len(l.mu.free); n > 0 {
		c = l.mu.free[n-1]
		l.mu.free = l.mu.free[:n-1]
	} else {
		c = new(consumer)
	}
	c.key = key
	l.mu.consumers[key] = c
	return c
}

// dropConsumerLocked forgets an idle consumer.
func (l *Limiter) dropConsumerLocked(c *consumer) {
	delete(l.mu.consumers, c.key)
	*c = consumer{}
	if len(l.mu.free) < maxFreeConsumers {
		l.mu.free = append(l.mu.free, c)
	}
}
