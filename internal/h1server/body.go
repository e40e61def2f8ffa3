// The request body reader: bounded by Content-Length or chunked framing,
// read from the connection's buffer first, drained (within a bound) at the
// end so the connection can be reused.

package h1server

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// body is a request body of known length, read from the connection's
// buffer and then the connection. Safe for concurrent use (the handler may
// hand it to another goroutine, as the proxy's transport does).
type body struct {
	c         *conn
	mu        sync.Mutex
	remaining int64
	sawEOF    bool
	closed    bool // Close was called, or the request finished
	early     bool // closed with more than maxDrain unread, or the drain failed
	err       error
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.readLocked(p)
}

func (b *body) readLocked(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.remaining == 0 {
		b.sawEOF = true
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	c := b.c
	var n int
	var err error
	switch {
	case c.r < c.w:
		n = copy(p, c.buf[c.r:c.w])
		c.r += n
	case len(p) >= len(c.buf):
		c.clearDeadline()
		n, err = c.sock.Read(p)
	default:
		c.clearDeadline()
		c.r, c.w = 0, 0
		var m int
		m, err = c.sock.Read(c.buf)
		c.w = m
		n = copy(p, c.buf[:m])
		c.r = n
	}
	b.remaining -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		b.err = err
		c.broken.Store(true)
		return n, err
	}
	if b.remaining == 0 {
		b.sawEOF = true
		c.armWatch()
		return n, io.EOF
	}
	return n, nil
}

// Close reads what is left of the body, up to maxDrain, so the connection
// can serve another request (as net/http's server body does); a larger
// remainder, or a failing drain, closes the connection after the answer.
func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.drainLocked()
	return nil
}

// drainLocked discards the unread remainder (bounded by maxDrain and
// drainTimeout) or marks the body early-closed.
func (b *body) drainLocked() {
	if b.sawEOF || b.err != nil {
		b.early = b.err != nil
		return
	}
	if b.remaining > maxDrain {
		b.early = true
		return
	}
	c := b.c
	if c.r == c.w {
		_ = c.nc.SetReadDeadline(time.Now().Add(drainTimeout))
		c.deadlineSet, c.idleUntil = true, time.Time{}
	}
	var scratch [512]byte
	for !b.sawEOF {
		if _, err := b.readLocked(scratch[:]); err != nil && err != io.EOF {
			b.early = true
			return
		}
	}
}

// finish ends the body with its request: later reads fail.
func (b *body) finish() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}
