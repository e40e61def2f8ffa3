// A connection's side of client-gone watching (watch.go holds the server's
// watch list and sweeper): arming, the watcher's read, disarming, and the
// idle close and abort that the sweeper and Shutdown use.

package h1server

import (
	"time"
)

// armWatch lists the connection for a watcher (watch.go) while the request
// is in the handler (whose body, if any, has been read to its end).
func (c *conn) armWatch() {
	c.mu.Lock()
	if c.watch == watchOff && c.inHandler {
		c.watch = watchArmed
		c.watchGen++
		c.srv.watches.add(c, c.watchGen)
	}
	c.mu.Unlock()
}

// watchClient runs in a goroutine of its own, started by the sweeper for
// the arming gen once the handler has run for watchDelay: one read on the
// connection, whose failure means the client went away (the request's
// context is cancelled) and whose bytes (a pipelined request) are kept for
// the loop.
func (c *conn) watchClient(gen uint64) {
	c.mu.Lock()
	if c.watch != watchArmed || c.watchGen != gen {
		c.mu.Unlock()
		return // disarmed in the meantime (and maybe armed again since)
	}
	if c.r > 0 {
		copy(c.buf, c.buf[c.r:c.w])
		c.r, c.w = 0, c.w-c.r
	}
	if c.w == len(c.buf) {
		c.watch = watchOff // a full buffer of pipelined bytes: nothing to learn
		c.mu.Unlock()
		return
	}
	// Cleared before the state says reading, so that disarmWatch's past
	// deadline (set once it sees watchReading) always comes after.
	if c.deadlineSet {
		_ = c.nc.SetReadDeadline(time.Time{})
		c.deadlineSet = false
	}
	c.watch = watchReading
	c.mu.Unlock()

	n, err := c.sock.Read(c.buf[c.w:])
	c.mu.Lock()
	c.w += n
	if err != nil && !c.aborted {
		c.broken.Store(true)
		if c.ctx != nil {
			c.ctx.cancel()
		}
	}
	c.watch = watchEnded
	c.mu.Unlock()
	c.watchDone <- struct{}{}
}

// disarmWatch stops the watcher after the handler returned: its listing, or
// the pending read (through a past deadline, waited for).
func (c *conn) disarmWatch() {
	c.mu.Lock()
	c.inHandler = false
	switch c.watch {
	case watchArmed:
		c.watch = watchOff
		c.srv.watches.remove(c)
		c.mu.Unlock()
		return
	case watchReading:
		c.aborted = true
		c.mu.Unlock()
		_ = c.nc.SetReadDeadline(pastDeadline)
		<-c.watchDone
		c.deadlineSet, c.idleUntil = true, time.Time{}
	case watchEnded:
		c.mu.Unlock()
		<-c.watchDone
	default:
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	c.watch = watchOff
	c.aborted = false
	c.mu.Unlock()
}

// closeIfIdle closes the connection if it waits for a request (a new one
// only after newConnGrace).
func (c *conn) closeIfIdle(now time.Time) {
	if c.state.CompareAndSwap(stateIdle, stateClosed) ||
		now.Sub(c.accepted) > newConnGrace && c.state.CompareAndSwap(stateNew, stateClosed) {
		_ = c.nc.Close()
	}
}

// abort closes the connection at once and cancels its request.
func (c *conn) abort() {
	// First, so that nothing is written once the handler sees the cancel.
	// Over TLS, the socket itself: tls.Conn's Close may first write an
	// alert (for up to 5 s), and this runs under the server's lock.
	if c.raw != nil {
		_ = c.raw.Close()
	} else {
		_ = c.nc.Close()
	}
	c.mu.Lock()
	c.closed = true
	if c.ctx != nil {
		c.ctx.cancel()
	}
	c.mu.Unlock()
}
