package proxy

// Copying an upstream's answer to the client (respond): its headers less
// hop-by-hop ones, its trailers, and its body in pooled chunks, flushed as
// it arrives when its length is unknown, each write within the send
// timeout. An answer that fits the first chunk is read whole before
// anything is written, and the attempt and the admission slot end then:
// a client that reads slowly holds only its own connection.

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// copyResponseHeader copies an upstream's response headers, less hop-by-hop
// ones, into dst.
func copyResponseHeader(dst, src http.Header) {
	conn := src["Connection"]
	for k, vv := range src {
		if upstream.IsHopHeader(k) || (len(conn) > 0 && upstream.ConnectionListed(conn, k)) {
			continue
		}
		dst[k] = vv
	}
}

func announceTrailers(dst, trailer http.Header) {
	if len(trailer) == 0 {
		return
	}
	keys := make([]string, 0, len(trailer))
	for k := range trailer {
		keys = append(keys, k)
	}
	dst["Trailer"] = []string{strings.Join(keys, ", ")}
}

// copyTrailers copies the upstream's trailers into dst once its body has
// ended. A trailer the upstream did not announce in its Trailer header (a
// gRPC server's grpc-status, HTTP/2 needs no announcement) is sent with
// http.TrailerPrefix, which both net/http's servers and levee's HTTP/1.1
// loop take as "a trailer declared after the head".
func copyTrailers(dst, trailer http.Header) {
	announced := dst["Trailer"]
	for k, vv := range trailer {
		if upstream.ConnectionListed(announced, k) {
			dst[k] = vv
		} else {
			dst[http.TrailerPrefix+k] = vv
		}
	}
}

// streaming reports whether a response must be flushed as it arrives rather
// than buffered: bodies of unknown length (chunked, server-sent events,
// long polls).
func streaming(resp *http.Response) bool {
	return resp.ContentLength == -1
}

type copySide uint8

const (
	sideUpstream copySide = iota
	sideClient
	// sideDrain: levee cut the answer, its table's drain timeout passed
	// (drain.go).
	sideDrain
)

type copyError struct {
	side copySide
	err  error
}

// copyBufSize is the chunk in which bodies are streamed.
const copyBufSize = 32 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// sender writes an answer to the client: each write (and flush) must be
// taken within timeout (NGINX's send_timeout), set as the client's write
// deadline before it through the ResponseWriter (levee's HTTP/1.1 loop,
// net/http's HTTP/1 server and each HTTP/2 stream, whose deadline resets
// the stream even while it waits for flow-control window). A client that
// stops reading then fails the write instead of holding what the answer
// holds (an upstream connection, a data route's database connection) for
// as long as it likes. The zero timeout sets no deadline. No allocation.
type sender struct {
	w       http.ResponseWriter
	dl      writeDeadliner // nil: no send timeout
	timeout time.Duration
	flusher flushErrorer // nil: no flush after each write
}

// writeDeadliner is what sets a response's write deadline (as
// http.ResponseController finds it).
type writeDeadliner interface {
	SetWriteDeadline(time.Time) error
}

// flushErrorer is a Flusher that reports the write error (levee's loop,
// net/http's HTTP/1 and HTTP/2 writers).
type flushErrorer interface {
	FlushError() error
}

// plainFlusher adapts a Flusher without FlushError.
type plainFlusher struct{ f http.Flusher }

func (p plainFlusher) FlushError() error { p.f.Flush(); return nil }

// newSender returns a sender to w with the send timeout (0: none),
// flushing after each write when flush is set.
func newSender(w http.ResponseWriter, timeout time.Duration, flush bool) sender {
	s := sender{w: w}
	if timeout > 0 {
		if dl := writerAs[writeDeadliner](w); dl != nil {
			s.dl, s.timeout = dl, timeout
		}
	}
	if flush {
		switch f := w.(type) {
		case flushErrorer:
			s.flusher = f
		case http.Flusher:
			s.flusher = plainFlusher{f}
		}
	}
	return s
}

// writerAs returns the first of w and the ResponseWriters it wraps that
// implements T (a deadline setter), looking through Unwrap as
// http.ResponseController does; the zero T when none does.
func writerAs[T any](w http.ResponseWriter) T {
	for range 8 { // bounded: a chain of wrappers this deep is a bug
		if t, ok := any(w).(T); ok {
			return t
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	var none T
	return none
}

// arm starts the wait for the client's next write.
func (s *sender) arm() {
	if s.dl != nil {
		_ = s.dl.SetWriteDeadline(time.Now().Add(s.timeout))
	}
}

// write writes p, within the send timeout, and flushes if asked to.
func (s *sender) write(p []byte) (int, error) {
	s.arm()
	n, err := s.w.Write(p)
	if err == nil && s.flusher != nil {
		err = s.flusher.FlushError()
	}
	return n, err
}

// writeChunks writes p in copy-buffer chunks, each within the send
// timeout, so that the timeout bounds the gap between two writes the
// client accepts, whatever the size of an answer read whole.
func (s *sender) writeChunks(p []byte) (int, error) {
	n := 0
	for len(p) > 0 { // bounded: len(p)/copyBufSize+1 writes
		c := min(len(p), copyBufSize)
		m, err := s.write(p[:c])
		n += m
		if err != nil {
			return n, err
		}
		p = p[c:]
	}
	return n, nil
}

// readAnswer reads the start of an answer's body into buf, for respond to
// know whether the whole answer is in hand before anything is written to
// the client: a body of known length that fits buf is read whole; one of
// unknown length gets one read (waiting for more could hold back a
// streamed answer's first event). The answer to a HEAD request has no
// body, whatever its Content-Length says. complete reports that the body
// ended within buf[:n]; err is the upstream's read error (never io.EOF).
func readAnswer(resp *http.Response, head bool, buf []byte) (n int, complete bool, err error) {
	switch cl := resp.ContentLength; {
	case cl > 0 && cl <= int64(len(buf)) && !head:
		n, err = io.ReadFull(resp.Body, buf[:cl])
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the endpoint broke off before the body
		}
		return n, err == nil, err
	case cl <= 0 || head:
		// One read, which also sees the end of an empty body (so the
		// connection it came on can go back to its pool).
		n, err = resp.Body.Read(buf)
		if err == io.EOF {
			return n, true, nil
		}
		return n, false, err
	}
	return 0, false, nil // larger than buf: streamed
}

// responder answers the client with what an upstream sent: the answer
// copied, read ahead or relayed (relay.go), or the connection handed over
// to a protocol switch (upgrade.go). It holds the few long-lived parts
// of the Handler that answering needs (the memory budget for an answer
// read whole, the set of upgraded connections, the logger); the Handler
// builds it once and lends it to each request's forwarding, so that an
// attempt answers without coming back to the Handler.
type responder struct {
	memory   budget
	upgrades *upgradeSet
	logger   *slog.Logger
	// drainClosed counts long connections levee closed (drain.go); nil
	// without metrics.
	drainClosed *prometheus.CounterVec
}

// respond streams an upstream's answer to the client; the deferred end of
// attempt a reports it to the endpoint.
func (o *responder) respond(w http.ResponseWriter, r *http.Request, x *exchange, a *attempt, resp *http.Response) {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		a.report() // now: a tunnel is not a request in flight at the endpoint
		if !switchRequested(r.Header, resp.Header) {
			resp.Body.Close() // an upstream may not switch to what was not offered (framing.go)
			a.res.broken = true
			x.refuse(w, ReasonUpstreamUnavailable)
			return
		}
		x.status = http.StatusSwitchingProtocols
		o.serveUpgrade(w, r, x, resp)
		return
	}

	if x.usage != nil && !x.usage.owned {
		resp.Body = &meteredBody{ReadCloser: resp.Body, u: x.usage} // usage.go
	}
	dst := w.Header()
	copyResponseHeader(dst, resp.Header)
	announceTrailers(dst, resp.Trailer)
	if x.route.Headers != nil || x.route.CORS != nil {
		answerHeaders(dst, r, x) // the route's header changes and CORS (cors.go)
	}
	x.status = resp.StatusCode

	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	head := r.Method == http.MethodHead
	if cl := resp.ContentLength; !head && cl > int64(len(buf)) && cl <= x.route.BufferAnswerBytes && o.memory.reserve(x, cl) {
		// Larger than the copy buffer but within the route's answer
		// buffer, and the memory budget has room (held until the request
		// ends, as the buffer is): read whole too, as NGINX's
		// proxy_buffering does, so that a slow reader of a 256 KiB answer
		// holds no slot either. Without room it streams.
		buf = make([]byte, cl)
	}
	n, complete, readErr := readAnswer(resp, head, buf)
	if complete {
		// The whole answer is in hand before any of it goes to the client:
		// the attempt ends (the endpoint's connection goes back to its
		// pool) and the admission slot is given back now, so a client that
		// reads slowly, or never, holds its own connection and this
		// buffer, not the upstream's capacity.
		resp.Body.Close()
		a.end(x)
		x.releaseAdmission()
	}
	var cw *compressWriter
	if x.route.Compression != nil {
		if cw = o.startCompression(w, r, x, resp.StatusCode, resp.ContentLength); cw != nil {
			w = cw // compress.go; each flush of a streamed answer flushes the encoder
			defer cw.endCoding(false)
		}
	}
	s := newSender(w, x.route.SendTimeout, streaming(resp))
	s.arm() // the head may be written at once (HTTP/2, a flush)
	w.WriteHeader(resp.StatusCode)
	var copyErr *copyError
	switch {
	case readErr != nil:
		resp.Body.Close()
		copyErr = &copyError{side: sideUpstream, err: readErr}
	case !complete:
		// The rest streams: read ahead of the client, so that the slot is
		// released once the upstream's answer ends (relay.go, which
		// closes the body: levee's pooled one must be closed once).
		x.bytesOut, copyErr = o.relay(s, resp.Body, x, a, buf[:n])
	case n > 0:
		nw, err := s.writeChunks(buf[:n])
		x.bytesOut = int64(nw)
		if err != nil {
			copyErr = &copyError{side: sideClient, err: err}
		}
	}
	if copyErr != nil {
		if copyErr.side == sideDrain {
			// The table the request started on was replaced longer than
			// its drain timeout ago: the stream is cut, as a shutdown
			// would, and the endpoint is not blamed.
			o.countDrained(x, "stream", DrainTimeout)
			panic(http.ErrAbortHandler)
		}
		if r.Context().Err() != nil || copyErr.side == sideClient {
			return
		}
		if errors.Is(copyErr.err, errQuotaCut) {
			// The answer crossed the app's byte quota: what fitted went
			// out, and the connection (or stream) is aborted so the cut
			// cannot pass for a complete answer. Not the endpoint's fault.
			x.reason = ReasonQuotaExhausted
			panic(http.ErrAbortHandler)
		}
		// The endpoint broke off mid-body. The status is already sent, so the
		// only honest signal left is to abort the client's connection (or
		// stream) so that the truncation cannot pass for a complete answer.
		a.res.broken = true
		x.reason = ReasonUpstreamUnavailable
		panic(http.ErrAbortHandler)
	}
	if cw != nil {
		if cw.endCoding(true) != nil {
			return // the client failed: the coded stream's end could not be written
		}
		x.route.metrics.compressed(x.bytesOut, cw)
		x.bytesOut = cw.out.n // what went on the wire
	}
	copyTrailers(dst, resp.Trailer)
}
