package h1server

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/rawsock"
)

// Bounds of one connection.
const (
	// smallBufSize is the read buffer a connection starts with and goes
	// back to when it waits for a request with nothing buffered; most
	// request heads fit. Pooled.
	smallBufSize = 1 << 10
	// bigBufSize is the next read buffer, for larger heads and bodies.
	// Pooled. Heads larger still get a buffer of their own, at most the
	// header cap, dropped after the request.
	bigBufSize = 8 << 10
	// writeBufSize is the pooled response buffer, taken for each response
	// and given back once it is flushed. 8 KiB: a head with a 4 KiB body
	// read whole goes out in one write (with 4 KiB, two: bench/syscalls.sh
	// counted 3.0 writes per proxied 4 KiB answer against 2.0 for 64 B).
	writeBufSize = 8 << 10
	// maxDrain is the most unread request body the loop reads after the
	// handler (or its Close) to keep the connection, as net/http's
	// maxPostHandlerReadBytes; a larger remainder closes the connection.
	maxDrain = 256 << 10
	// drainTimeout bounds reading that remainder, and the lingering read
	// before closing after an error answer.
	drainTimeout = 500 * time.Millisecond
	// watchDelay is how long a handler runs before a watcher starts
	// reading the connection to notice a client that went away. It bounds
	// how late a departure is noticed (the waits it matters for, in the
	// admission queue or on a slow upstream, last tens of milliseconds or
	// more) and spares the watcher to requests answered sooner: under a
	// closed-loop load of 32 connections a proxied request takes 3-4 ms, so
	// 2 ms started a watcher for most of them (about 5 % more CPU per
	// request than 20 ms in docs/performance.md's runs).
	watchDelay = 10 * time.Millisecond
	// newConnGrace: a new connection without a request yet counts as
	// idle for Shutdown only after this long (as net/http).
	newConnGrace = 5 * time.Second
)

var (
	smallBufs = sync.Pool{New: func() any { b := make([]byte, smallBufSize); return &b }}
	bigBufs   = sync.Pool{New: func() any { b := make([]byte, bigBufSize); return &b }}
	writers   = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufSize) }}

	// pastDeadline makes a pending read return at once.
	pastDeadline = time.Unix(1, 0)
)

// Connection states, for Shutdown.
const (
	stateNew    int32 = iota // no request yet
	stateActive              // a request is being read or served
	stateIdle                // waiting for the next request, nothing buffered
	stateClosed              // closed by Shutdown while idle
)

// Watcher states (under conn.mu).
const (
	watchOff     = iota
	watchArmed   // on the server's watch list
	watchReading // the watcher's read is pending
	watchEnded   // the read returned; watchDone has a value
)

// conn is one client connection served by the loop. Its goroutine owns it;
// the fields under mu are shared with the watcher and with Close.
type conn struct {
	srv *Server
	nc  net.Conn
	// sock is nc with raw reads and writes (rawsock): the request path's
	// I/O; deadlines, Close and hand-offs use nc.
	sock     net.Conn
	remote   string
	accepted time.Time
	state    atomic.Int32

	// Over TLS (Options.TLSConfig): raw is the accepted connection, tls
	// the TLS one over it (also nc and sock), tlsState its state after the
	// handshake, every request's r.TLS. All nil in clear text.
	raw      net.Conn
	tls      *tls.Conn
	tlsState *tls.ConnectionState

	// buf[r:w] are bytes read and not consumed yet. bufp is its pool
	// handle (nil for an oversized head buffer).
	buf  []byte
	bufp *[]byte
	r, w int

	bw   *bufio.Writer // taken per response
	h    head
	resp response

	lastPost bool // the last request was a POST (net/http then skips stray CRLF)
	// deadlineSet: a read deadline is set (reads during the handler must
	// clear it first).
	deadlineSet bool
	// idleUntil is the read deadline readHead set for the wait for a next
	// request (zero: the one set is another's); while deadlineSet it is
	// kept for the next wait when it falls within [IdleTimeout,
	// IdleTimeout+slack] of it, sparing a runtime timer modification per
	// request. Every other setter of a read deadline zeroes it.
	idleUntil time.Time
	// broken: a read failed (client gone); the connection is not reused.
	broken atomic.Bool
	// bodyDeadline: the handler set a read deadline for the request body
	// (response.SetReadDeadline); body reads keep it rather than clear it.
	bodyDeadline atomic.Bool

	mu        sync.Mutex
	ctx       *reqCtx // the current request's context (reqctx.go)
	watch     int
	inHandler bool      // the watcher may be armed only while the handler runs
	aborted   bool      // the watcher's read was stopped on purpose
	watchGen  uint64    // counts armings, so a late sweeper's watcher is ignored
	wn        watchNode // under srv.watches.mu
	watchDone chan struct{}
	closed    bool
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, accepted: time.Now(), watchDone: make(chan struct{}, 1)}
	if s.tlsConfig == nil {
		c.sock = rawsock.Wrap(nc)
	} else {
		c.raw = nc
		c.tls = tls.Server(nc, s.tlsConfig)
		c.nc, c.sock = c.tls, c.tls
	}
	if a := nc.RemoteAddr(); a != nil {
		c.remote = a.String()
	}
	c.state.Store(stateNew)
	c.resp.c = c
	c.resp.header = make(http.Header, 8)
	return c
}

// serve runs the connection's loop until it closes or is handed off.
func (c *conn) serve() {
	handedOff := false
	defer func() {
		if v := recover(); v != nil {
			// A bug of the loop's own (handler panics are caught in
			// callHandler): this connection ends, the process goes on.
			c.srv.logger.Error("h1server: panic serving "+c.remote, "panic", v, "stack", string(debug.Stack()))
			handedOff = false
		}
		if !handedOff {
			_ = c.nc.Close()
		}
		c.releaseBuf()
		c.srv.untrack(c)
	}()
	if c.srv.proxyProtocol != nil && !c.readProxyHeader() {
		return
	}
	if c.tls != nil {
		serve, off := c.handshake()
		if !serve {
			handedOff = off
			return
		}
	}
	for first := true; ; first = false {
		n, v, ok := c.readHead(first)
		if !ok {
			return
		}
		switch v {
		case verdictReject:
			c.reject(c.h.status, c.h.rejectText)
			return
		case verdictHandoff:
			if c.tls != nil && c.h.handoff == handoffH2Preface {
				// Over TLS, HTTP/2 is chosen by ALPN (RFC 9113
				// section 3.2), never by a preface on an HTTP/1.1
				// connection; net/http would pass it to the handler.
				c.reject(0, textH2PrefaceOverTLS)
				return
			}
			handedOff = c.handOff(c.h.handoff)
			return
		}
		if !c.serveRequest(n) {
			return
		}
	}
}

// readHead reads until buf[r:] holds a complete head and parses it. n is
// the head's length. ok is false when the connection is to be closed
// without an answer (or after one readHead wrote itself).
func (c *conn) readHead(first bool) (n int, v verdict, ok bool) {
	s := c.srv
	if c.r == c.w {
		c.r, c.w = 0, 0
		if len(c.buf) > smallBufSize {
			c.releaseBuf()
		}
		if !first {
			c.state.Store(stateIdle)
		}
	}
	if c.buf == nil {
		c.bufp = smallBufs.Get().(*[]byte)
		c.buf = *c.bufp
	}
	// The deadline: the whole head within ReadHeaderTimeout on a new
	// connection or when bytes are waiting; otherwise IdleTimeout for the
	// first byte, then ReadHeaderTimeout from there (set only when the
	// first read did not bring the whole head).
	headerArmed := first || c.r < c.w
	now := time.Now()
	switch {
	case headerArmed && s.headerTimeout > 0:
		_ = c.nc.SetReadDeadline(now.Add(s.headerTimeout))
		c.deadlineSet, c.idleUntil = true, time.Time{}
	case !headerArmed && s.idleTimeout > 0:
		// The connection closes between IdleTimeout and IdleTimeout/16
		// more after the last request (idleSlack).
		want := now.Add(s.idleTimeout)
		if !c.deadlineSet || c.idleUntil.Before(want) || c.idleUntil.Sub(want) > idleSlack(s.idleTimeout) {
			c.idleUntil = want.Add(idleSlack(s.idleTimeout))
			_ = c.nc.SetReadDeadline(c.idleUntil)
			c.deadlineSet = true
		}
	case c.deadlineSet:
		_ = c.nc.SetReadDeadline(time.Time{})
		c.deadlineSet = false
	}
	if c.lastPost {
		// As net/http: up to 4 stray CR/LF bytes after a POST body are
		// skipped.
		for i := 0; i < 4; i++ {
			if c.r == c.w && !c.fill() {
				return 0, 0, false
			}
			if b := c.buf[c.r]; b != '\r' && b != '\n' {
				break
			}
			c.r++
		}
	}
	scan := 0
	for {
		if c.r < c.w {
			end, next, bareLF := findHeadEnd(c.buf[c.r:c.w], scan)
			if bareLF {
				// A bare LF line end: levee frames requests on CRLF only
				// (see parse.go), so the head is refused, whoever would
				// have served it.
				c.h.status, c.h.rejectText = 0, textBareLF
				return 0, verdictReject, true
			}
			if end > 0 {
				if end > s.maxHead {
					c.tooLarge()
					return 0, 0, false
				}
				v := c.h.parse(c.buf[c.r : c.r+end])
				if v == verdictServe {
					c.lastPost = string(c.buf[c.r:c.r+int(c.h.m1)]) == http.MethodPost
				}
				return end, v, true
			}
			scan = next
			if c.w-c.r > s.maxHead {
				c.tooLarge()
				return 0, 0, false
			}
		}
		if !headerArmed && c.r < c.w && s.headerTimeout > 0 {
			// The first read brought part of a head: the rest must come
			// within ReadHeaderTimeout. (A head that came whole, nearly
			// every one, needs no deadline of its own.)
			headerArmed = true
			_ = c.nc.SetReadDeadline(time.Now().Add(s.headerTimeout))
			c.deadlineSet, c.idleUntil = true, time.Time{}
		}
		if !c.fill() {
			if c.r < c.w && !c.broken.Load() {
				// The client ended its side mid-head: net/http answers 400.
				c.reject(0, "")
			}
			return 0, 0, false
		}
	}
}

// idleSlack is how much later than IdleTimeout an idle connection may be
// closed, so that under load its deadline is set about once per slack
// instead of once per request.
func idleSlack(idle time.Duration) time.Duration { return idle / 16 }

// fill reads more of the head into buf, growing it as needed (up to the
// header cap plus one byte). It reports false on a read error or when
// Shutdown closed the idle connection.
func (c *conn) fill() bool {
	if c.w == len(c.buf) {
		c.grow()
	}
	n, err := c.sock.Read(c.buf[c.w:])
	if n > 0 {
		if !c.state.CompareAndSwap(stateIdle, stateActive) && !c.state.CompareAndSwap(stateNew, stateActive) && c.state.Load() == stateClosed {
			return false
		}
		c.w += n
		return true
	}
	if err == nil {
		return true
	}
	c.broken.Store(err != io.EOF)
	return false
}

// grow makes room after buf[r:w]: it moves the unread bytes to the front,
// or takes the next larger buffer.
func (c *conn) grow() {
	unread := c.w - c.r
	if c.r > 0 && unread < len(c.buf)/2 {
		copy(c.buf, c.buf[c.r:c.w])
		c.r, c.w = 0, unread
		return
	}
	var nb []byte
	var np *[]byte
	switch {
	case len(c.buf) < bigBufSize:
		np = bigBufs.Get().(*[]byte)
		nb = *np
	default:
		nb = make([]byte, min(2*len(c.buf), c.srv.maxHead+1))
	}
	copy(nb, c.buf[c.r:c.w])
	c.releaseBuf()
	c.buf, c.bufp = nb, np
	c.r, c.w = 0, unread
}

func (c *conn) releaseBuf() {
	if c.bufp != nil {
		switch len(*c.bufp) {
		case smallBufSize:
			smallBufs.Put(c.bufp)
		case bigBufSize:
			bigBufs.Put(c.bufp)
		}
	}
	c.buf, c.bufp = nil, nil
}

// handOff gives the connection, with every byte read so far, to net/http.
func (c *conn) handOff(reason int) bool {
	if c.deadlineSet {
		_ = c.nc.SetReadDeadline(time.Time{})
	}
	if c.srv.inShutdown.Load() {
		return false
	}
	return c.srv.handOff(c.nc, c.buf[c.r:c.w], reason)
}

// reject answers status (0: 400) in plain text as net/http does (text is
// the reason, if any) and the connection closes: after a malformed head
// nothing later on the connection can be trusted to be framed as the
// client meant (RFC 9112 section 6.3). It lingers, so that the client reads
// the answer before the close (unread bytes would make it a reset).
func (c *conn) reject(status int, text string) {
	if c.srv.inShutdown.Load() {
		return
	}
	if status == 0 {
		status = http.StatusBadRequest
	}
	msg := strconv.Itoa(status) + " " + http.StatusText(status)
	if text != "" {
		msg += ": " + text
	}
	bw := c.writer()
	bw.WriteString("HTTP/1.1 " + msg + "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" + msg)
	_ = bw.Flush()
	c.putWriter()
	c.lingerClose()
}

// tooLarge answers a head over the cap with 431 and closes.
func (c *conn) tooLarge() {
	if c.srv.headerTooLarge == nil {
		const msg = "431 Request Header Fields Too Large"
		bw := c.writer()
		bw.WriteString("HTTP/1.1 " + msg + "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" + msg)
		_ = bw.Flush()
		c.putWriter()
	} else {
		r := &http.Request{Method: http.MethodGet, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Body: http.NoBody, Close: true, RemoteAddr: c.remote, TLS: c.tlsState}
		c.resp.reset(r, nil, 1, false)
		c.resp.closeAfter = true
		c.srv.headerTooLarge(&c.resp)
		c.resp.finish()
	}
	c.lingerClose()
}

// lingerClose stops sending and reads (discarding, bounded in bytes and
// time) what the client still sends, so that closing does not reset the
// connection before the client read the answer.
func (c *conn) lingerClose() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(drainTimeout))
	_, _ = io.CopyN(io.Discard, c.nc, maxDrain)
}

func (c *conn) writer() *bufio.Writer {
	if c.bw == nil {
		c.bw = writers.Get().(*bufio.Writer)
		c.bw.Reset(c.sock)
	}
	return c.bw
}

func (c *conn) putWriter() {
	if c.bw != nil {
		c.bw.Reset(nil)
		writers.Put(c.bw)
		c.bw = nil
	}
}

// serveRequest serves the parsed head of n bytes at buf[r:] and reports
// whether the connection stays open for another request.
func (c *conn) serveRequest(n int) bool {
	h := &c.h
	text := string(c.buf[c.r : c.r+n]) // the one copy the request's strings share
	c.r += n
	target := text[h.t0:h.t1]
	u, err := parseURL(target)
	if err != nil {
		c.reject(0, "")
		return false
	}
	proto := "HTTP/1.1"
	if h.minor == 0 {
		proto = "HTTP/1.0"
	}
	host := ""
	if h.nHost == 1 {
		host = text[h.host.v0:h.host.v1]
	}
	ctx := &reqCtx{}
	tmpl := http.Request{
		Method: text[:h.m1], URL: u, Proto: proto, ProtoMajor: 1, ProtoMinor: h.minor,
		Header: h.header(text), Host: host, RemoteAddr: c.remote, RequestURI: target,
		Close: h.closeRq, Body: http.NoBody, TLS: c.tlsState,
	}
	var b *body
	if h.length > 0 {
		b = &body{c: c, remaining: h.length}
		tmpl.Body, tmpl.ContentLength = b, h.length
	}
	r := tmpl.WithContext(ctx)

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		ctx.cancel()
		return false
	}
	c.ctx = ctx
	c.inHandler = true
	c.mu.Unlock()

	c.resp.reset(r, b, h.minor, h.keep10)
	if b == nil {
		c.armWatch()
	}
	ok := c.callHandler(r)
	c.disarmWatch()
	if ok {
		c.resp.finish()
	} else if c.bw != nil {
		_ = c.bw.Flush() // what was written so far; the answer stays cut short
	}
	c.putWriter()
	c.mu.Lock()
	c.ctx = nil
	c.mu.Unlock()
	ctx.cancel()
	if b != nil {
		b.finish()
	}
	if c.bodyDeadline.Swap(false) {
		// A body deadline the handler left set must not bound the wait
		// for the next request (readHead sets its own, or none).
		_ = c.nc.SetReadDeadline(time.Time{})
		c.deadlineSet = false
	}
	if !ok || c.resp.closeAfter || c.broken.Load() || c.srv.inShutdown.Load() {
		if ok && c.resp.lingerAfter {
			c.lingerClose()
		}
		return false
	}
	return true
}

// callHandler runs the handler, reporting false when it panicked (the
// connection is then closed, as net/http does; http.ErrAbortHandler is
// not logged).
func (c *conn) callHandler(r *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			ok = false
			if v != http.ErrAbortHandler {
				c.srv.panics.Add(1)
				c.srv.logger.Error("h1server: panic serving "+c.remote, "panic", v, "stack", string(debug.Stack()))
			}
		}
	}()
	c.srv.handler.ServeHTTP(&c.resp, r)
	return true
}

// clearDeadline removes the read deadline before a body read, unless the
// handler set one for the body (response.SetReadDeadline).
func (c *conn) clearDeadline() {
	if c.deadlineSet && !c.bodyDeadline.Load() {
		_ = c.nc.SetReadDeadline(time.Time{})
		c.deadlineSet = false
	}
}
