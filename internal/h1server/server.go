// Package h1server serves levee's data listener, clear text or TLS: an
// HTTP/1.1 server loop of levee's own for the requests that make up nearly
// all of the traffic, and net/http on the same connection for everything
// else (over TLS, HTTP/2 connections chosen by ALPN go to net/http whole:
// see tls.go).
//
// Why: net/http's server costs more CPU per request than levee's handler
// does (a background read goroutine and its extra read per request, a
// header clone at WriteHeader, deadline juggling, allocation). Under
// overload, when most requests are refused in microseconds, that overhead
// is most of levee's CPU. See docs/performance.md for the figures.
//
// What the loop serves: HTTP/1.0 and HTTP/1.1 requests with an origin-form
// target and a Content-Length body or none (see parse.go for the exact
// rule). It calls the Handler with an *http.Request whose method, URL,
// Proto, Header, Host, ContentLength and Close are what net/http would
// give, and a ResponseWriter (with Flusher) that writes the response head
// straight into a pooled buffer: Content-Length when the handler set it or
// when the handler finished within the first 2 KiB of body, chunked
// otherwise (close-delimited for HTTP/1.0), trailers, HEAD, Connection:
// close, keep-alive and pipelining.
//
// What it hands to net/http (the Fallback server) on the same connection,
// with the bytes already read replayed first: the HTTP/2 prior-knowledge
// preface (h2c), Upgrade (WebSocket), Expect (100-continue), chunked
// bodies, and every other valid shape the loop does not serve itself
// (absolute-form and asterisk-form targets, CONNECT, HTTP/1.2 and later,
// over 128 fields). Each head is checked whole first, its framing decided
// strictly (parse.go): a head refused there never reaches net/http, and a
// handed-off HTTP/1 connection serves that one request and closes, so that
// net/http, laxer about framing, never parses a head the loop did not
// check. Handoffs are counted by reason (Stats).
//
// Client gone: while a request is in the handler, the loop's goroutine is
// busy, so nothing reads the connection. When the handler starts (and the
// request body is done), the connection joins the server's watch list; a
// sweeper starts a one-read watcher for each handler that has run for
// watchDelay (watch.go): its read returning EOF or an error cancels the
// request's context; a byte arriving (a pipelined request) is kept for the
// loop. Requests answered within watchDelay (all refusals, most proxied
// requests) cost a list insertion and removal, not a runtime timer.
package h1server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Server. Handler and Fallback are required.
type Options struct {
	// Handler serves the requests the loop parses.
	Handler http.Handler
	// Fallback serves handed-off connections (it is given them through
	// an in-memory listener by Serve). It should have the same Handler,
	// timeouts and header limit. New wraps its Handler (see oneRequest):
	// a handed-off HTTP/1 connection serves one request and closes.
	Fallback *http.Server
	// ReadHeaderTimeout bounds the time from a request's first byte (a
	// connection's start, for its first request) to the end of its head;
	// as http.Server's, 0: none.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection; 0: ReadHeaderTimeout (as net/http falls back to its
	// read timeout), and both 0: no bound.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps a request head, as http.Server's does
	// (net/http allows 4096 bytes above it; so does the loop). A larger
	// head is answered by HeaderTooLarge and the connection closed.
	// 0: http.DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// HeaderTooLarge writes the answer to a head over the cap (431). nil:
	// a plain-text 431 as net/http writes.
	HeaderTooLarge func(w http.ResponseWriter)
	// Logger receives handler panics (nil: discard).
	Logger *slog.Logger
	// TLSConfig, when set, makes the listener's connections TLS (see
	// tls.go): each is handshaken first, within ReadHeaderTimeout (or
	// defaultHandshakeTimeout), by its own goroutine; one that negotiated
	// "h2" through ALPN goes to the Fallback unchanged (a *tls.Conn, which
	// net/http serves with HTTP/2: the Fallback must allow HTTP/2), and
	// every other is served by the loop, with the same strict framing as
	// in clear text. New keeps a clone; NextProtos should offer "h2" only
	// if the Fallback serves it. nil: clear text.
	TLSConfig *tls.Config
	// ProxyProtocol, when set, makes every connection start with a PROXY
	// protocol header from a trusted peer, read before anything else (the
	// TLS handshake too) within ReadHeaderTimeout (proxyheader.go). nil:
	// none is read.
	ProxyProtocol *ProxyProtocol
}

// Stats are the server's counters since it was made.
type Stats struct {
	// Handoffs counts connections handed to net/http, by reason.
	Handoffs map[string]uint64
	// TLSHandshakes counts TLS handshakes by result (TLSResults).
	TLSHandshakes map[string]uint64
	// HTTP2GoAways counts the GOAWAY frames written on HTTP/2
	// connections by error code, and the connections the flood guard
	// closed, by reason (HTTP2GoAwayReasons; h2guard.go).
	HTTP2GoAways map[string]uint64
	// HTTP2ResetStreamsDropped counts the HEADERS + RST_STREAM pairs
	// (streams a client opened and cancelled at once) the flood guard
	// took out before net/http read them (h2drop.go).
	HTTP2ResetStreamsDropped uint64
	// ProxyProtocolRefused counts the connections closed for their PROXY
	// protocol header (or its absence, or an untrusted peer), by reason
	// (ProxyProtocolReasons); ProxyProtocolHeaders the headers accepted,
	// by version ("v1", "v2").
	ProxyProtocolRefused map[string]uint64
	ProxyProtocolHeaders map[string]uint64
}

// tlsResultNames are the result labels of Stats.TLSHandshakes: success, or
// error (a failed handshake: a bad or clear-text client, a timeout).
var tlsResultNames = [2]string{"success", "error"}

// TLSResults lists the results Stats.TLSHandshakes counts by.
func TLSResults() []string { return tlsResultNames[:] }

// handoffNames are the reason labels of Stats.Handoffs.
var handoffNames = [numHandoffReasons]string{
	handoffH2Preface:        "h2_preface",
	handoffUpgrade:          "upgrade",
	handoffExpect:           "expect",
	handoffTransferEncoding: "transfer_encoding",
	handoffOther:            "other",
	handoffALPNH2:           "alpn_h2",
}

// HandoffReasons lists the reasons Stats.Handoffs counts by.
func HandoffReasons() []string { return handoffNames[:] }

// Server is the clear-text HTTP/1.1 server. Safe for concurrent use.
type Server struct {
	handler        http.Handler
	fallback       *http.Server
	headerTimeout  time.Duration
	idleTimeout    time.Duration
	maxHead        int // the cap on a head's bytes (MaxHeaderBytes + 4096)
	headerTooLarge func(w http.ResponseWriter)
	logger         *slog.Logger
	tlsConfig      *tls.Config // nil: clear text
	proxyProtocol  *ProxyProtocol

	// proxyRefused counts PROXY headers refused, indexed like
	// proxyproto.Reasons(); proxyAccepted those read, by version - 1.
	proxyRefused  [numProxyReasons]atomic.Uint64
	proxyAccepted [2]atomic.Uint64

	handoffs [numHandoffReasons]atomic.Uint64
	// handshakes counts TLS handshakes, indexed like tlsResultNames.
	handshakes [len(tlsResultNames)]atomic.Uint64
	// goAways counts GOAWAYs and guard closes, indexed like goAwayNames.
	goAways [numGoAwayReasons]atomic.Uint64
	// maxH2Block caps an HTTP/2 header block's payload bytes (h2guard.go).
	maxH2Block int64
	// h2ResetDropped counts the pairs the guard dropped (h2drop.go).
	h2ResetDropped atomic.Uint64
	// testHookH2Stop, when set (by tests), is told of every HTTP/2
	// connection the guard's read side closes.
	testHookH2Stop atomic.Pointer[func(v h2Verdict, frames uint64, continuations int)]

	// panics counts the handler panics recovered (not
	// http.ErrAbortHandler): a health signal of the automatic rollback.
	panics atomic.Uint64

	inShutdown atomic.Bool
	mu         struct {
		sync.Mutex
		ln    net.Listener
		conns map[*conn]struct{}
		// fallbackLn feeds handed-off connections to the fallback.
		fallbackLn *chanListener
		serving    bool
	}
	watches      watchList     // handlers running, for client-gone watchers
	fallbackDone chan struct{} // closed when the fallback's Serve returned
	fallbackErr  error
}

// New returns a Server; it starts nothing.
func New(o Options) (*Server, error) {
	if o.Handler == nil {
		return nil, errors.New("h1server: Options.Handler is required")
	}
	if o.Fallback == nil {
		return nil, errors.New("h1server: Options.Fallback is required")
	}
	if o.ReadHeaderTimeout < 0 || o.IdleTimeout < 0 || o.MaxHeaderBytes < 0 {
		return nil, errors.New("h1server: timeouts and MaxHeaderBytes must not be negative")
	}
	maxHead := o.MaxHeaderBytes
	if maxHead == 0 {
		maxHead = http.DefaultMaxHeaderBytes
	}
	idle := o.IdleTimeout
	if idle == 0 {
		idle = o.ReadHeaderTimeout
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		handler: o.Handler, fallback: o.Fallback,
		headerTimeout: o.ReadHeaderTimeout, idleTimeout: idle,
		maxHead: maxHead + 4096, headerTooLarge: o.HeaderTooLarge, logger: logger,
		fallbackDone: make(chan struct{}),
	}
	if o.TLSConfig != nil {
		s.tlsConfig = o.TLSConfig.Clone()
	}
	if o.ProxyProtocol != nil {
		pp := *o.ProxyProtocol
		pp.Trusted = append([]netip.Prefix(nil), pp.Trusted...)
		s.proxyProtocol = &pp
	}
	fbMax := o.Fallback.MaxHeaderBytes
	if fbMax <= 0 {
		fbMax = http.DefaultMaxHeaderBytes
	}
	s.maxH2Block = int64(fbMax) + headerBlockMargin
	s.mu.conns = map[*conn]struct{}{}
	inner := o.Fallback.Handler
	if inner == nil {
		inner = http.DefaultServeMux
	}
	if _, done := inner.(oneRequest); !done {
		o.Fallback.Handler = oneRequest{h: inner, srv: s}
	}
	return s, nil
}

// oneRequest wraps the fallback's handler so that net/http closes a
// handed-off HTTP/1 connection after the one request the loop checked:
// the loop decides every head's framing before a handoff (parse.go), and
// a later request on the same connection would reach net/http unchecked
// (net/http accepts Content-Length with Transfer-Encoding, bare LF line
// ends, Transfer-Encoding on HTTP/1.0). The cost is a new connection
// after each chunked, Expect or absolute-form request; the requests the
// loop serves itself (nearly all) keep their connection. HTTP/2 streams
// (h2c, its own framing) and protocol switches (101; the connection is
// hijacked) are not affected.
//
// It also counts the handler panics net/http recovers on this path
// (HTTP/2 streams, upgrades, handed-off requests) in the server's Panics,
// as the loop counts its own (not http.ErrAbortHandler), logs them with
// their stack the same way, then lets the panic go on to net/http, which
// resets the stream or closes the connection as before.
type oneRequest struct {
	h   http.Handler
	srv *Server
}

func (o oneRequest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		// net/http closes after a response whose Connection is "close"
		// (other than a 101), and keeps the header on the wire.
		w.Header()["Connection"] = connectionClose
	}
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler && o.srv != nil {
				o.srv.panics.Add(1)
				o.srv.logger.Error("h1server: panic serving "+r.RemoteAddr+" (net/http path)", "panic", v, "stack", string(debug.Stack()))
			}
			panic(v)
		}
	}()
	o.h.ServeHTTP(w, r)
}

var connectionClose = []string{"close"}

// Panics returns how many handler panics the server recovered since it
// was made, its loop's and those net/http recovered on the fallback path
// (oneRequest); http.ErrAbortHandler, a deliberate abort, is not counted.
func (s *Server) Panics() uint64 { return s.panics.Load() }

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	st := Stats{
		Handoffs:      make(map[string]uint64, numHandoffReasons),
		TLSHandshakes: make(map[string]uint64, len(tlsResultNames)),
		HTTP2GoAways:  make(map[string]uint64, numGoAwayReasons),

		HTTP2ResetStreamsDropped: s.h2ResetDropped.Load(),
		ProxyProtocolRefused:     make(map[string]uint64, numProxyReasons),
		ProxyProtocolHeaders:     map[string]uint64{"v1": s.proxyAccepted[0].Load(), "v2": s.proxyAccepted[1].Load()},
	}
	for i, r := range ProxyProtocolReasons() {
		st.ProxyProtocolRefused[r] = s.proxyRefused[i].Load()
	}
	for i := range s.handoffs {
		st.Handoffs[handoffNames[i]] = s.handoffs[i].Load()
	}
	for i := range s.handshakes {
		st.TLSHandshakes[tlsResultNames[i]] = s.handshakes[i].Load()
	}
	for i := range s.goAways {
		st.HTTP2GoAways[goAwayNames[i]] = s.goAways[i].Load()
	}
	return st
}

// Serve accepts connections on ln, one goroutine each, until Shutdown or
// Close; it then returns http.ErrServerClosed. Another error means ln
// failed (ln is closed). Serve may be called once.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.serving || s.inShutdown.Load() {
		s.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	s.mu.serving = true
	s.mu.ln = ln
	fl := newChanListener(ln.Addr())
	fl.firstAccept = s.guardFallbackH2
	s.mu.fallbackLn = fl
	s.mu.Unlock()
	go func() {
		defer close(s.fallbackDone)
		if err := s.fallback.Serve(fl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.fallbackErr = err
		}
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.inShutdown.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// As net/http: back off 5 ms doubling to 1 s.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			ln.Close()
			return err
		}
		backoff = 0
		c := newConn(s, nc)
		if !s.track(c) {
			nc.Close()
			continue
		}
		go c.serve()
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// track adds c to the open connections, or reports false during shutdown.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inShutdown.Load() {
		return false
	}
	s.mu.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
}

// handOff gives c's connection, with the bytes already read, to the
// fallback server. It reports false when the server is shutting down (the
// caller closes the connection).
func (s *Server) handOff(nc net.Conn, pending []byte, reason int) bool {
	s.handoffs[reason].Add(1)
	s.mu.Lock()
	fl := s.mu.fallbackLn
	s.mu.Unlock()
	pending = append([]byte(nil), pending...)
	if tc, ok := nc.(*tls.Conn); ok {
		// Delivered as itself only after ALPN chose h2 (handOffTLS);
		// here net/http must see HTTP/1 with the bytes replayed, and it
		// sets r.TLS from the wrapper's ConnectionState.
		return fl.deliver(&tlsReplayConn{replayConn: replayConn{Conn: tc, pending: pending}, tc: tc})
	}
	rc := &replayConn{Conn: nc, pending: pending}
	if reason == handoffH2Preface {
		// h2c: net/http reads the preface (replayed) itself.
		return fl.deliver(s.newH2Guard(rc, nc, false))
	}
	return fl.deliver(rc)
}

// Shutdown stops the server gracefully: the listener closes at once, idle
// connections are closed, requests in flight finish (their connections
// close after the response), handed-off connections are shut down by the
// fallback's own Shutdown. It returns when all are closed, or ctx's error
// when ctx ends first (then call Close).
func (s *Server) Shutdown(ctx context.Context) error {
	s.inShutdown.Store(true)
	s.mu.Lock()
	if s.mu.ln != nil {
		s.mu.ln.Close()
	}
	fl := s.mu.fallbackLn
	serving := s.mu.serving
	s.mu.Unlock()

	if fl != nil {
		fl.Close() // the fallback's Shutdown closes it too, unless its Serve has not begun
	}
	fbErr := make(chan error, 1)
	if serving {
		go func() { fbErr <- s.fallback.Shutdown(ctx) }()
	} else {
		fbErr <- nil
	}

	// Poll as net/http does: from 1 ms, doubling, at most 500 ms apart.
	wait := time.Millisecond
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if s.closeIdle() == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			wait = min(2*wait, 500*time.Millisecond)
			timer.Reset(wait)
		}
	}
	s.watches.close() // every connection is closed: nothing left to watch
	if err := <-fbErr; err != nil {
		return err
	}
	if serving {
		<-s.fallbackDone
	}
	return nil
}

// closeIdle closes the connections waiting for a request (a new one only
// after 5 s without one, as net/http) and returns how many remain open.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for c := range s.mu.conns {
		c.closeIfIdle(now)
	}
	return len(s.mu.conns)
}

// Close closes the listener and every connection at once, cancelling the
// requests in flight, and closes the fallback server.
func (s *Server) Close() error {
	s.inShutdown.Store(true)
	s.mu.Lock()
	if s.mu.ln != nil {
		s.mu.ln.Close()
	}
	for c := range s.mu.conns {
		c.abort()
	}
	if s.mu.fallbackLn != nil {
		s.mu.fallbackLn.Close()
	}
	serving := s.mu.serving
	s.mu.Unlock()
	s.watches.close()
	err := s.fallback.Close()
	if serving {
		<-s.fallbackDone
	}
	return err
}

// chanListener is the in-memory listener of handed-off connections.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	// firstAccept, if set, runs in the first Accept, before it returns
	// (net/http's Serve has set up the server by then: guardFallbackH2).
	firstAccept func()
	firstOnce   sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	if l.firstAccept != nil {
		l.firstOnce.Do(l.firstAccept)
	}
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// deliver passes c to the fallback's accept loop (which takes it at once:
// net/http starts a goroutine per connection), or reports false once the
// listener is closed.
func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// replayConn is a handed-off connection: its first reads return the bytes
// the loop had already read, then it reads the connection.
type replayConn struct {
	net.Conn
	mu      sync.Mutex // net/http may read from two goroutines in turn
	pending []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}
