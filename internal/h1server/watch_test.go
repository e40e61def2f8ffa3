package h1server

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

func (l *watchList) counts() (started, sweepers uint64, running bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started, l.sweepers, l.running
}

// TestWatchOnlySlowHandlers: requests answered at once start no watcher; a
// handler still running after watchDelay gets exactly one, and it notices
// the client leaving. After watchIdle with nothing armed the sweeper exits,
// and the next slow request starts a new one that still does its job.
func TestWatchOnlySlowHandlers(t *testing.T) {
	defer func(d time.Duration) { watchIdle = d }(watchIdle)
	watchIdle = 50 * time.Millisecond
	cancelled := make(chan struct{}, 2)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" {
			io.WriteString(w, "fast")
			return
		}
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-time.After(5 * time.Second):
		}
	}))
	c, br := ts.dial()
	for range 200 {
		io.WriteString(c, "GET /fast HTTP/1.1\r\nHost: h\r\n\r\n")
		if _, body := readResponse(t, br, "GET"); body != "fast" {
			t.Fatalf("body %q", body)
		}
	}
	if started, _, _ := ts.srv.watches.counts(); started != 0 {
		t.Fatalf("%d watchers started for 200 requests answered at once, want 0", started)
	}

	slowThenLeave := func(round int) {
		c, _ := ts.dial()
		io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
		testkit.Eventually(t, 3*time.Second, func() (bool, string) {
			started, _, _ := ts.srv.watches.counts()
			return started == uint64(round), fmt.Sprintf("round %d: %d watchers started into a slow handler", round, started)
		})
		c.Close()
		select {
		case <-cancelled:
		case <-time.After(3 * time.Second):
			t.Fatalf("round %d: the request's context was not cancelled after the client left", round)
		}
	}
	slowThenLeave(1)

	testkit.Until(t, 3*time.Second, "the sweeper to stop after the last handler ended (watchIdle 50 ms)", func() bool {
		_, _, running := ts.srv.watches.counts()
		return !running
	})
	_, before, _ := ts.srv.watches.counts()
	slowThenLeave(2)
	if _, after, _ := ts.srv.watches.counts(); after != before+1 {
		t.Fatalf("sweepers started: %d before the second slow request, %d after; want one more", before, after)
	}
}

// TestWatchDueAfterWholeTicks drives the list's ticks by hand: connections
// armed between ticks k and k+1 are due at tick k+3 (so at least watchDelay
// after the arming), in arming order; a removed one never is; a stale
// arming's watcher does nothing to a later arming.
func TestWatchDueAfterWholeTicks(t *testing.T) {
	l := &watchList{running: true} // no sweeper goroutine: the test ticks
	newConn := func() *conn { return &conn{watchDone: make(chan struct{}, 1)} }
	a, b, gone := newConn(), newConn(), newConn()
	idle := 0
	l.add(a, 1)
	l.add(gone, 1)
	l.advance(&idle, 100) // tick 1
	l.add(b, 1)
	l.remove(gone)
	if l.advance(&idle, 100); l.started != 0 { // tick 2
		t.Fatalf("tick 2: %d watchers, want 0", l.started)
	}
	if l.advance(&idle, 100); l.started != 1 || l.head != b || a.wn.listed { // tick 3: a is due
		t.Fatalf("tick 3: %d watchers, head %p (a %p b %p); want a started, b waiting", l.started, l.head, a, b)
	}
	if l.advance(&idle, 100); l.started != 2 || l.head != nil { // tick 4: b is due
		t.Fatalf("tick 4: %d watchers, head %p; want b started too", l.started, l.head)
	}
	if gone.wn.listed {
		t.Fatal("a removed connection is still listed")
	}
	// Idle ticks (tick 4 was the first): the sweeper exits after more than
	// maxIdle of them.
	idle = 0
	for i := 0; i < 3; i++ {
		if l.advance(&idle, 3) {
			t.Fatalf("exit after %d idle ticks, want after more than 3", idle)
		}
	}
	if !l.advance(&idle, 3) || l.running {
		t.Fatal("no exit after 4 idle ticks with maxIdle 3")
	}
	// The watchers started above find their connections not armed (watch is
	// watchOff) and return; a stale generation does the same for an armed one.
	a.mu.Lock()
	a.watch, a.watchGen = watchArmed, 2
	a.mu.Unlock()
	a.watchClient(1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.watch != watchArmed {
		t.Fatalf("a watcher for arming 1 acted on arming 2 (watch state %d)", a.watch)
	}
}
