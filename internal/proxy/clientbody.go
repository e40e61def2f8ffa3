package proxy

// Client faults are the client's.
//
// A request body levee forwards is read while the attempt runs, by the
// transport, so a body that breaks (bad chunked framing, a Content-Length
// the client does not fill, a client that leaves mid-body) surfaces as the
// attempt's RoundTrip error, indistinguishable by its text from an endpoint
// that broke the connection. clientBody sits between the client's body and
// the transport and remembers the first read error that came from the
// client's side; an attempt that failed while it holds one is the client's
// fault: answered 400 bad_request (or recorded 499 when the client's
// connection is gone), ended as endpoint.Abandoned (no failure run for
// outlier detection, no latency sample for least_request) and dropped from
// the adaptive limit's samples.
//
// Bodies that stop are the client's too. With a body timeout
// (server.body_timeout), clientBody sets the client's read deadline before
// each read through the ResponseWriter (http.ResponseController's
// SetReadDeadline: levee's HTTP/1.1 loop, net/http's HTTP/1 server for
// chunked and Expect bodies, and one HTTP/2 stream alike), so the longest
// gap between two reads of a body is the timeout, however it is framed or
// carried. A read past it fails with os.ErrDeadlineExceeded: the client is
// answered 408 body_timeout (when nothing of the answer was sent), the
// attempt, if one was forwarding the body, fails and its upstream request
// is cancelled, and the endpoint is not blamed. The deadline is cleared
// after each read, so that it bounds only the client (not an upstream slow
// to take the body) and cannot fire in the server's own later reads of the
// connection (its client-gone watchers cancel a request on a read error).

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// clientBody wraps a request body to remember the first read error (EOF
// aside). The transport may read it from another goroutine while the
// handler checks failure: the error is published with an atomic state.
type clientBody struct {
	rc    io.ReadCloser
	state atomic.Uint32 // 0: no error, 1: being recorded, 2: err is set
	err   error
	// n counts the bytes read, for the access log's bytes_in (atomic: the
	// transport may still be reading when the handler logs).
	n atomic.Int64
	// dl sets the client's read deadline, timeout before each read (nil:
	// no body timeout, or the body ended; only Read, never concurrent
	// with itself, uses it after watchClientBody). done is set when the handler returns: a transport
	// still reading the body after that sets no deadline (on levee's loop
	// the connection may serve the next request by then).
	dl      readDeadliner
	timeout time.Duration
	done    atomic.Bool
}

// readDeadliner is what sets a request's read deadline: the
// ResponseWriters of levee's loop, of net/http's HTTP/1 server and of its
// HTTP/2 streams implement it (http.ResponseController finds it the same
// way).
type readDeadliner interface {
	SetReadDeadline(time.Time) error
}

// watchClientBody wraps r's body, when it has one, in a clientBody and
// returns it (nil for a bodiless request: no allocation). With timeout >
// 0 and a ResponseWriter that can set read deadlines, each read of the
// body must bring a byte within timeout.
func watchClientBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) *clientBody {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	b := &clientBody{rc: r.Body}
	if timeout > 0 {
		if dl := writerAs[readDeadliner](w); dl != nil {
			b.dl, b.timeout = dl, timeout
		}
	}
	r.Body = b
	return b
}

func (b *clientBody) Read(p []byte) (int, error) {
	armed := b.dl != nil && !b.done.Load()
	if armed {
		_ = b.dl.SetReadDeadline(time.Now().Add(b.timeout))
	}
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	if armed && !b.done.Load() {
		// The deadline bounds the wait in a read, not the time between
		// reads (an upstream slow to take the body is not the client's
		// fault; an HTTP/2 stream's deadline fires even with no read
		// pending), and must not outlive the body.
		_ = b.dl.SetReadDeadline(time.Time{})
	}
	if err != nil {
		b.dl = nil // the body is over: a read after its end touches no deadline
	}
	if err != nil && err != io.EOF && b.state.CompareAndSwap(0, 1) {
		b.err = err
		b.state.Store(2)
	}
	return n, err
}

// end marks the request over (nil-safe): later reads set no deadline.
func (b *clientBody) end() {
	if b != nil {
		b.done.Store(true)
	}
}

// bodyTimedOut reports whether err, read from the client's body, is the
// body timeout (the read deadline clientBody set).
func bodyTimedOut(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

func (b *clientBody) Close() error { return b.rc.Close() }

// failure returns the client-side read error, if one happened (nil-safe).
func (b *clientBody) failure() error {
	if b == nil || b.state.Load() != 2 {
		return nil
	}
	return b.err
}

// clientGone reports whether err, read from the client's body, says that
// the client's connection is gone (reset, closed under us): then no answer
// can reach it and the request is recorded 499. A malformed or short body
// on a connection that still stands is answered 400.
func clientGone(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrBodyReadAfterClose)
}

// bytesRead returns the body bytes read so far (nil-safe: 0).
func (b *clientBody) bytesRead() int64 {
	if b == nil {
		return 0
	}
	return b.n.Load()
}

// clientBodyFailed answers when reading the client's body failed (to
// buffer it, or while an attempt forwarded it): over the route's limit
// (413), the client went away (499), the body was malformed or short
// (400 bad_request), it stopped arriving for the body timeout (408
// body_timeout), or the memory budget had no room to buffer it
// (errNoMemory, a sheddable request: 503). None of these is an
// endpoint's failure.
func (x *exchange) clientBodyFailed(w http.ResponseWriter, err error) {
	if errors.Is(err, errNoMemory) {
		x.shed(w, ReasonMemoryPressure, 0)
		return
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		x.refuse(w, ReasonBodyTooLarge)
	case bodyTimedOut(err):
		x.refuse(w, ReasonBodyTimeout)
	case clientGone(err):
		x.status = statusClientClosed
	default:
		// Even when the request's context is cancelled (net/http cancels
		// it on a read error from the connection): a client that only
		// half-closed still reads, and an unwritten answer would be an
		// empty 200.
		x.refuse(w, ReasonBadRequest)
	}
}
