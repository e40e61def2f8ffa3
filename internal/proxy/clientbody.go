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

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
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
}

// watchClientBody wraps r's body, when it has one, in a clientBody and
// returns it (nil for a bodiless request: no allocation).
func watchClientBody(r *http.Request) *clientBody {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	b := &clientBody{rc: r.Body}
	r.Body = b
	return b
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n.Add(int64(n))
	if err != nil && err != io.EOF && b.state.CompareAndSwap(0, 1) {
		b.err = err
		b.state.Store(2)
	}
	return n, err
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
