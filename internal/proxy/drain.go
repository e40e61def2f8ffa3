package proxy

import (
	"errors"
	"sync"
	"time"
)

var errDrained = errors.New("the configuration this answer started on was replaced longer than server.drain_timeout ago")

// Draining a replaced table (issue 28.4). A reload, a data-API publish or
// an apps change swaps the table; requests in flight finish on the table
// they started with, which stays alive (with everything it references)
// until the last of them ends. Short requests end on their own; the long
// ones, a tunnel (WebSocket) and an answer streamed through relay (SSE, a
// long download), could hold a replaced table forever. So a replaced table
// gives them its drain timeout (server.drain_timeout, the value in force
// when it was replaced): a tunnel still open then is closed at once, a
// streamed answer at its next chunk (an answer that sends nothing is left
// to the route's timeouts), each counted in levee_drain_closed_total and
// logged. The cost is one timer per replaced table, none per request.

// DefaultDrainTimeout is a table's drain timeout unless SetDrainTimeout
// says otherwise (config.DefaultDrainTimeout).
const DefaultDrainTimeout = 10 * time.Minute

// DrainReason is why a long connection was closed by levee rather than by
// one of its ends: the label of levee_drain_closed_total.
type DrainReason string

const (
	// DrainTimeout: the table it started on was replaced longer than
	// server.drain_timeout ago.
	DrainTimeout DrainReason = "drain_timeout"
	// DrainShutdown: levee shut down (after the shutdown's drain).
	DrainShutdown DrainReason = "shutdown"
)

// tableDrain is a table's retirement: expired is closed drain timeout
// after the table was replaced. A separate allocation, so the timer holds
// it and not the table.
type tableDrain struct {
	once    sync.Once
	expired chan struct{}
	timer   *time.Timer
}

func newTableDrain() *tableDrain { return &tableDrain{expired: make(chan struct{})} }

// retire starts the drain clock once: expired closes after timeout.
func (d *tableDrain) retire(timeout time.Duration) {
	d.once.Do(func() {
		d.timer = time.AfterFunc(timeout, func() { close(d.expired) })
	})
}

// SetDrainTimeout sets how long the requests in flight on the table this
// one replaces may run on after the swap. Call it before Swap.
func (t *Table) SetDrainTimeout(d time.Duration) { t.drainTimeout = d }

// drainExpired is closed once t was replaced longer than its drain
// timeout ago. nil (a table never swapped in through a Handler): never.
func (t *Table) drainExpired() <-chan struct{} {
	if t == nil || t.drain == nil {
		return nil
	}
	return t.drain.expired
}

// drained reports whether t's drain timeout has passed.
func (t *Table) drained() bool {
	select {
	case <-t.drainExpired():
		return true
	default:
		return false
	}
}

// countDrained counts and logs a long connection levee closed.
func (o *responder) countDrained(x *exchange, kind string, reason DrainReason) {
	if o.drainClosed != nil {
		o.drainClosed.WithLabelValues(string(reason)).Inc()
	}
	o.logger.Info("closed a long connection", "kind", kind, "reason", string(reason), "route", x.route.Name,
		"request_id", x.reqID, "open_for", time.Since(x.start).Round(time.Millisecond).String())
}
