package h1server

import (
	"sync"
	"time"
)

// Client-gone watching without a timer per request.
//
// A handler that runs longer than watchDelay gets a watcher (one read on its
// connection). Arming a runtime timer per request for that cost 5-10 % of
// levee's CPU per refused request: a timer that becomes the earliest on its
// P wakes another thread (runtime.wakeNetPoller), a futex wake and a
// context switch, for a request answered in microseconds. Instead, a
// connection entering its handler is appended to the server's watch list
// (a mutex and two pointers), and one sweeper goroutine per server walks
// the head of that list every watchTick, starting the watchers that are
// due. The sweeper exits after watchIdle with nothing armed and is started
// again by the next arming, so an idle server ticks nothing.

// watchTick is the sweeper's period. A watcher starts between watchDelay
// and watchDelay+watchTick after its handler began.
const watchTick = 5 * time.Millisecond

// watchDueTicks: a connection armed when the tick count was k is due at
// tick k+3. Ticks k+1, k+2 and k+3 all come after the arming, so at least
// two full periods (watchDelay) have passed, and at most three.
const watchDueTicks = uint64(watchDelay/watchTick) + 1

// watchIdle is how long the sweeper goes on ticking with nothing armed
// before it exits (a variable for tests).
var watchIdle = time.Second

// watchList holds the connections whose handler runs, in arming order.
type watchList struct {
	mu         sync.Mutex
	head, tail *conn
	tick       uint64 // ticks so far
	running    bool   // a sweeper goroutine runs
	stopped    bool   // the server closed: no more sweepers
	stop       chan struct{}
	done       sync.WaitGroup
	started    uint64 // watchers started, for tests
	sweepers   uint64 // sweeper goroutines started, for tests
}

// watch fields of a conn, under watchList.mu.
type watchNode struct {
	prev, next *conn
	listed     bool
	armTick    uint64
	gen        uint64
}

// add lists c for the arming gen (called with c.mu held).
func (l *watchList) add(c *conn, gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return // the server closed its connections; nothing to watch for
	}
	n := &c.wn
	n.listed, n.armTick, n.gen = true, l.tick, gen
	n.prev, n.next = l.tail, nil
	if l.tail != nil {
		l.tail.wn.next = c
	} else {
		l.head = c
	}
	l.tail = c
	if !l.running {
		if l.stop == nil {
			l.stop = make(chan struct{})
		}
		l.running = true
		l.sweepers++
		l.done.Add(1)
		go l.sweep()
	}
}

// remove takes c off the list if it is on it (called with c.mu held).
func (l *watchList) remove(c *conn) {
	l.mu.Lock()
	l.unlink(c)
	l.mu.Unlock()
}

func (l *watchList) unlink(c *conn) {
	n := &c.wn
	if !n.listed {
		return
	}
	if n.prev != nil {
		n.prev.wn.next = n.next
	} else {
		l.head = n.next
	}
	if n.next != nil {
		n.next.wn.prev = n.prev
	} else {
		l.tail = n.prev
	}
	*n = watchNode{}
}

// sweep is the sweeper goroutine: each tick it starts the due watchers; it
// exits after watchIdle with an empty list, or when the server closes.
func (l *watchList) sweep() {
	defer l.done.Done()
	t := time.NewTicker(watchTick)
	defer t.Stop()
	idleTicks, maxIdle := 0, int(watchIdle/watchTick)
	for {
		select {
		case <-t.C:
		case <-l.stop:
			l.mu.Lock()
			l.running = false
			l.mu.Unlock()
			return
		}
		if l.advance(&idleTicks, maxIdle) {
			return
		}
	}
}

// advance is one tick: it starts the due watchers and reports whether the
// sweeper should exit (nothing armed for maxIdle ticks, or the server
// closed), in which case it is marked not running.
func (l *watchList) advance(idleTicks *int, maxIdle int) (exit bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tick++
	// The list is in arming order, so the due connections are a prefix of
	// it; the walk stops at the first that is not (bounded by the handlers
	// that began at least watchDelay ago). Each watcher is told the arming
	// it is for: a later arming of the same connection is not due yet.
	for c := l.head; c != nil && l.tick-c.wn.armTick >= watchDueTicks; c = l.head {
		go c.watchClient(c.wn.gen)
		l.started++
		l.unlink(c)
	}
	if l.head == nil {
		*idleTicks++
	} else {
		*idleTicks = 0
	}
	exit = l.head == nil && (*idleTicks > maxIdle || l.stopped)
	if exit {
		l.running = false
	}
	return exit
}

// close stops the sweeper for good and waits for it to exit.
func (l *watchList) close() {
	l.mu.Lock()
	if !l.stopped {
		l.stopped = true
		if l.stop != nil {
			close(l.stop)
		}
	}
	l.mu.Unlock()
	l.done.Wait()
}
