package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/levee-gw/levee/internal/idempotency"
	"github.com/levee-gw/levee/internal/rawsock"
)

// The HTTP/1.1 fast path.
//
// Most proxied requests are bodiless reads (GET, HEAD, ...). For those,
// net/http.Transport's machinery (an outbound *http.Request, a reader and a
// writer goroutine per connection, channels between them and the caller)
// costs more CPU than the exchange itself. h1Pool forwards such a request
// on a connection pool of its own, synchronously, in the handler's
// goroutine: write the request head straight from the inbound request into
// a buffered writer, flush (one write), read the response head (fastHead,
// h1head.go, for the common head; http.ReadResponse, which does the
// framing, for any other), and return the connection to
// the pool when the handler has read the body to its end.
//
// Only requests that are safe to send twice take this path (idempotent
// method, no body, not an upgrade; see FastPath), so a pooled connection
// that the endpoint closed while it sat idle is retried once on a new
// connection. Everything else goes through http.Transport unchanged.
//
// Pool: per endpoint address, a LIFO stack of idle connections (the most
// recently used first, so surplus connections age out), at most
// MaxIdlePerEndpoint long, guarded by a per-endpoint mutex held only to push
// or pop. A connection idle for Idle or longer is closed, never reused:
// when taken (LIFO order means everything beneath an expired entry has
// expired too) and by SweepIdle, which a gateway goroutine calls
// periodically. Work per request: one lock, one pop, one push.

// Buffer sizes of a pooled connection. Request heads are small; the read
// buffer holds the response head and, for small responses, the whole body.
// Larger bodies are read straight into the copy buffer, past this one.
const (
	h1ReadBufSize  = 8 << 10
	h1WriteBufSize = 4 << 10
)

// maxResponseHeaderBytes bounds a response's head, interim (1xx) heads
// included, as http.Transport's MaxResponseHeaderBytes does.
const maxResponseHeaderBytes = 1 << 20

// defaultMaxIdlePerEndpoint applies when Options.MaxIdlePerEndpoint
// is 0, as in http.Transport.
const defaultMaxIdlePerEndpoint = http.DefaultMaxIdleConnsPerHost

var (
	errResponseHeaderTooLarge = errors.New("upstream response headers exceed 1 MiB")
	errUnexpectedSwitch       = errors.New("upstream switched protocols without being asked to")
	errInvalidHeader          = errors.New("request header value contains a line break")
	errBadStatus              = errors.New("upstream sent a status code below 100")
	errIdle408                = errors.New("upstream answered 408 on a pooled connection")

	// pastDeadline makes every pending and future I/O on a connection fail
	// at once.
	pastDeadline = time.Unix(1, 0)
)

// FastPath reports whether r may take the h1 fast path: an idempotent
// method (safe to retry on a stale connection), no body, no upgrade.
// An HTTP/2 request always has a Body (net/http's server sets one even
// when HEADERS ended the stream); with ContentLength 0 it is empty: the
// stream ended, or the client declared (or garbled) a Content-Length,
// which holds it to 0 bytes (more DATA is a stream error).
func FastPath(r *http.Request) bool {
	if r.ContentLength != 0 || (r.Body != nil && r.Body != http.NoBody && r.ProtoMajor != 2) {
		return false
	}
	// The method alone (internal/idempotency): a key does not put a
	// request on the fast path.
	return idempotency.Method(r.Method) && !IsUpgrade(r.Header)
}

// h1Pool is one upstream's fast-path connection pool. Safe for concurrent
// use.
type h1Pool struct {
	dial           func(ctx context.Context, addr string) (net.Conn, error)
	responseHeader time.Duration // 0: no bound
	idle           time.Duration // 0: idle connections never expire
	maxIdle        int

	closed atomic.Bool
	// eps maps an endpoint address to its idle stack. It is copied on
	// write (under mu) when an address is first seen or when sweep drops
	// stacks that are empty, so lookups take no lock and do not allocate,
	// and the map holds only addresses with idle connections or recent use
	// (bounded by the endpoints seen within one sweep interval).
	eps atomic.Pointer[map[string]*h1Idle]
	mu  sync.Mutex
}

// h1Idle is one endpoint's stack of idle connections, newest last.
type h1Idle struct {
	mu    sync.Mutex
	conns []*h1Conn
	// lastUse is when a connection was last taken from or given back to
	// the stack.
	lastUse time.Time
	// dropped is set (under mu) when sweep removed this stack from the
	// map; connections coming back to it are closed instead of pooled.
	dropped bool
}

func newH1Pool(o Options, dial func(ctx context.Context, addr string) (net.Conn, error)) *h1Pool {
	p := &h1Pool{
		dial:           dial,
		responseHeader: o.ResponseHeader,
		idle:           o.Idle,
		maxIdle:        o.MaxIdlePerEndpoint,
	}
	if p.maxIdle <= 0 {
		p.maxIdle = defaultMaxIdlePerEndpoint
	}
	m := map[string]*h1Idle{}
	p.eps.Store(&m)
	return p
}

// endpoint returns addr's idle stack, creating it on first use.
func (p *h1Pool) endpoint(addr string) *h1Idle {
	if e := (*p.eps.Load())[addr]; e != nil {
		return e
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := *p.eps.Load()
	if e := old[addr]; e != nil {
		return e
	}
	m := make(map[string]*h1Idle, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	e := &h1Idle{}
	m[addr] = e
	p.eps.Store(&m)
	return e
}

// expired reports whether a connection idle since t is too old at now.
func (p *h1Pool) expired(t, now time.Time) bool {
	return p.idle > 0 && now.Sub(t) >= p.idle
}

// get pops e's most recently used connection that has not expired, or
// returns nil. Expired connections found on the way are closed.
func (p *h1Pool) get(e *h1Idle, now time.Time) *h1Conn {
	e.mu.Lock()
	e.lastUse = now
	n := len(e.conns)
	if n == 0 {
		e.mu.Unlock()
		return nil
	}
	c := e.conns[n-1]
	if !p.expired(c.idleSince, now) {
		e.conns[n-1] = nil
		e.conns = e.conns[:n-1]
		e.mu.Unlock()
		return c
	}
	// The newest has expired, so all have.
	dead := e.conns
	e.conns = nil
	e.mu.Unlock()
	for _, c := range dead {
		_ = c.nc.Close()
	}
	return nil
}

// put pushes c onto its endpoint's stack, or reports false when the stack is
// full or the pool closed (the caller then closes c).
func (p *h1Pool) put(c *h1Conn, now time.Time) bool {
	e := c.home
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastUse = now
	if p.closed.Load() || e.dropped || len(e.conns) >= p.maxIdle {
		return false
	}
	c.idleSince = now
	c.reused = true
	e.conns = append(e.conns, c)
	return true
}

// sweep closes the connections idle for Idle or longer at now and returns
// how many it closed. Work: one pass over each endpoint's stack.
func (p *h1Pool) sweep(now time.Time) int {
	if p.idle <= 0 {
		return 0
	}
	var dead []*h1Conn
	for _, e := range *p.eps.Load() {
		e.mu.Lock()
		i := 0 // oldest first: conns[:i] have expired
		for i < len(e.conns) && p.expired(e.conns[i].idleSince, now) {
			i++
		}
		if i > 0 {
			dead = append(dead, e.conns[:i]...)
			k := copy(e.conns, e.conns[i:])
			clear(e.conns[k:])
			e.conns = e.conns[:k]
		}
		e.mu.Unlock()
	}
	for _, c := range dead {
		_ = c.nc.Close()
	}
	p.dropUnused(now)
	return len(dead)
}

// dropUnused removes from the map the stacks that hold no idle connection
// and were not used for Idle, so addresses an upstream no longer has do not
// accumulate. A connection in flight whose stack was dropped is closed when
// it comes back.
func (p *h1Pool) dropUnused(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := *p.eps.Load()
	m := make(map[string]*h1Idle, len(old))
	for addr, e := range old {
		e.mu.Lock()
		if len(e.conns) == 0 && p.expired(e.lastUse, now) {
			e.dropped = true
		} else {
			m[addr] = e
		}
		e.mu.Unlock()
	}
	if len(m) != len(old) {
		p.eps.Store(&m)
	}
}

// closeIdle closes every idle connection.
func (p *h1Pool) closeIdle() {
	var dead []*h1Conn
	for _, e := range *p.eps.Load() {
		e.mu.Lock()
		dead = append(dead, e.conns...)
		e.conns = nil
		e.mu.Unlock()
	}
	for _, c := range dead {
		_ = c.nc.Close()
	}
}

// close closes every idle connection and makes connections that requests in
// flight give back later close instead of being pooled.
func (p *h1Pool) close() {
	p.closed.Store(true)
	p.closeIdle()
}

// idleCount returns the number of idle connections to addr (for tests).
func (p *h1Pool) idleCount(addr string) int {
	e := (*p.eps.Load())[addr]
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.conns)
}

// roundTrip forwards r (which FastPath accepted) to the endpoint at addr and
// returns the response with its head read. The caller must Close the body
// exactly once and not touch it afterwards; reading it to EOF first lets
// the connection be reused. On error no connection is held.
//
// A pooled connection that fails before any byte of the response arrived
// (the endpoint closed it while idle) is closed and the request is sent
// once more on a new connection; r is idempotent and bodiless, so that is
// safe, and the first failure is not the endpoint's.
//
// tm, when set, receives the connect and first-byte times (Timing).
func (p *h1Pool) roundTrip(ctx context.Context, r *http.Request, addr, reqID, xff string, tm *Timing) (*http.Response, error) {
	e := p.endpoint(addr)
	c := p.get(e, time.Now())
	if tm != nil {
		*tm = Timing{}
	}
	for {
		if c == nil {
			var t0 time.Time
			if tm != nil {
				t0 = time.Now()
			}
			nc, err := p.dial(ctx, addr)
			if err != nil {
				return nil, err
			}
			if tm != nil {
				tm.Connect = time.Since(t0)
			}
			c = newH1Conn(nc, e, p)
		}
		c.timing = tm
		resp, err := c.exchange(ctx, r, addr, reqID, xff, p.responseHeader)
		c.timing = nil
		if err == nil {
			return resp, nil
		}
		_ = c.nc.Close()
		if !c.reused || !errors.Is(err, errStale) || ctx.Err() != nil {
			if errors.Is(err, errStale) {
				err = errors.Unwrap(err)
			}
			if !c.reused {
				err = asTLSError(err) // a fresh connection's TLS alert (mTLS refused)
			}
			return nil, err
		}
		c = nil
	}
}

// errStale marks (wrapping the cause) a failure of a connection before any
// byte of the response arrived, the sign of a connection the endpoint
// closed while it was idle.
var errStale = errors.New("connection closed before the response began")

type staleError struct{ err error }

func (e staleError) Error() string   { return "upstream " + errStale.Error() + ": " + e.err.Error() }
func (e staleError) Unwrap() error   { return e.err }
func (e staleError) Is(t error) bool { return t == errStale }

// staleCause reports whether err, met writing a request or waiting for the
// first byte of its response, says the peer had closed the connection.
func staleCause(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// h1Conn is one upstream connection of the fast path. It is used by one
// request at a time; between requests it sits in its endpoint's stack.
type h1Conn struct {
	nc   net.Conn
	br   *bufio.Reader // reads through the h1Conn itself (header limit)
	bw   *bufio.Writer
	home *h1Idle
	pool *h1Pool

	idleSince time.Time // set when pooled
	reused    bool      // served a request before
	readLimit int64     // bytes the head may still take; MaxInt64 for bodies
	// headDeadline is the read deadline set for response heads (zero:
	// none), kept across requests while it still bounds the next head
	// within [headerTimeout, headerTimeout+slack] (exchangeHead), cleared
	// before a body read reaches the socket (Read).
	headDeadline time.Time
	// aborted is set by the abort hook before its past deadline, so that
	// a deadline cleared after it is set past again.
	aborted atomic.Bool

	abort func()      // c.setPastDeadline, bound once
	stop  func() bool // stops the current request's abort hook (context.AfterFunc's)
	// hooked is the current request's context when the abort hook sits in
	// its allocation-free slot (doneHooker) instead of stop.
	hooked doneHooker
	body   h1Body // the current response's body
	// timing receives the current exchange's first-byte time; nil: not
	// measured (set by roundTrip around exchange).
	timing *Timing
	// lines remembers the previous head's lines for fastHead (h1head.go).
	lines []string
}

func newH1Conn(nc net.Conn, home *h1Idle, p *h1Pool) *h1Conn {
	nc = rawsock.Wrap(nc) // reads and writes out of the scheduler's sight
	c := &h1Conn{nc: nc, home: home, pool: p, readLimit: math.MaxInt64}
	c.br = bufio.NewReaderSize(c, h1ReadBufSize)
	c.bw = bufio.NewWriterSize(nc, h1WriteBufSize)
	c.abort = c.setPastDeadline
	return c
}

func (c *h1Conn) setPastDeadline() {
	c.aborted.Store(true)
	_ = c.nc.SetDeadline(pastDeadline)
}

// deadlineSlack is how much later than headerTimeout a response head's
// deadline may fall, so that the deadline (a runtime timer modification
// each time it is set) is set about once per slack per connection under
// load instead of twice per request: a head is cut off between
// headerTimeout and headerTimeout+headerTimeout/16 after the request.
func deadlineSlack(headerTimeout time.Duration) time.Duration { return headerTimeout / 16 }

// armHeadDeadline makes sure a read deadline between now+headerTimeout and
// that plus deadlineSlack bounds the response head, setting one only when
// the deadline kept from an earlier request falls outside.
func (c *h1Conn) armHeadDeadline(now time.Time, headerTimeout time.Duration) {
	want := now.Add(headerTimeout)
	if d := c.headDeadline; !d.Before(want) && d.Sub(want) <= deadlineSlack(headerTimeout) {
		return
	}
	c.headDeadline = want.Add(deadlineSlack(headerTimeout))
	_ = c.nc.SetReadDeadline(c.headDeadline)
}

// clearHeadDeadline removes the head's read deadline before a body read
// (a body has no deadline of its own here); an abort that came first
// stands.
func (c *h1Conn) clearHeadDeadline() {
	c.headDeadline = time.Time{}
	_ = c.nc.SetReadDeadline(time.Time{})
	if c.aborted.Load() {
		_ = c.nc.SetDeadline(pastDeadline)
	}
}

// Read reads from the connection, failing once the head has used up
// readLimit.
func (c *h1Conn) Read(p []byte) (int, error) {
	if c.readLimit <= 0 {
		return 0, errResponseHeaderTooLarge
	}
	if int64(len(p)) > c.readLimit {
		p = p[:c.readLimit]
	}
	if c.readLimit == math.MaxInt64 && !c.headDeadline.IsZero() {
		c.clearHeadDeadline() // a body read: the head's deadline must not cut it
	}
	n, err := c.nc.Read(p)
	c.readLimit -= int64(n)
	return n, err
}

// exchange writes r's head and reads the response head. On success the
// response body is c.body and the abort hook stays armed until the body is
// closed; on error the hook is stopped and the caller closes c. Errors met
// before the first response byte are wrapped as staleError when their cause
// says the endpoint had closed the connection.
func (c *h1Conn) exchange(ctx context.Context, r *http.Request, addr, reqID, xff string, headerTimeout time.Duration) (*http.Response, error) {
	// A client that goes away frees this connection's I/O at once: the
	// pending write or read fails, and the caller (seeing ctx done)
	// classifies the request as abandoned rather than as a timeout.
	c.aborted.Store(false)
	if dh, ok := ctx.(doneHooker); ok && dh.DoneHook(c.abort) {
		c.hooked = dh
	} else {
		c.stop = context.AfterFunc(ctx, c.abort)
	}
	resp, err := c.exchangeHead(ctx, r, addr, reqID, xff, headerTimeout)
	if err == nil && ctx.Err() != nil {
		// The hook may have fired before the header deadline was cleared.
		err = ctx.Err()
	}
	if err != nil {
		c.stopHook()
		return nil, err
	}
	if resp.Body == nil { // fastHead's: ContentLength bytes follow in c.br
		c.body = h1Body{c: c, n: resp.ContentLength, keep: true}
	} else {
		c.body = h1Body{c: c, src: resp.Body, keep: !resp.Close}
	}
	resp.Body = &c.body
	return resp, nil
}

// doneHooker is a request context with one allocation-free slot for a
// function to run when it is done (h1server's request context): the abort
// hook takes it when free, so that a request costs no context.AfterFunc.
// DoneHook reports false when the slot is taken; StopDoneHook frees it and
// reports whether the function had not run, as AfterFunc's stop does.
type doneHooker interface {
	DoneHook(f func()) bool
	StopDoneHook() bool
}

// stopHook stops the current request's abort hook, however it was set,
// and reports whether it stopped it before it ran.
func (c *h1Conn) stopHook() bool {
	if c.hooked != nil {
		stopped := c.hooked.StopDoneHook()
		c.hooked = nil
		return stopped
	}
	stopped := c.stop()
	c.stop = nil
	return stopped
}

// testHookHeadWritten, when set by a test, runs between writing a request
// head and arming the response-header deadline.
var testHookHeadWritten func()

func (c *h1Conn) exchangeHead(ctx context.Context, r *http.Request, addr, reqID, xff string, headerTimeout time.Duration) (*http.Response, error) {
	var sent time.Time
	if c.timing != nil {
		sent = time.Now()
	}
	err := writeRequestHead(c.bw, r, addr, reqID, xff)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		if !errors.Is(err, errInvalidHeader) && staleCause(err) {
			err = staleError{err}
		}
		return nil, err
	}
	if testHookHeadWritten != nil {
		testHookHeadWritten()
	}
	if headerTimeout > 0 {
		c.armHeadDeadline(time.Now(), headerTimeout)
		if ctx.Err() != nil {
			// The abort hook may have set its past deadline before this
			// one replaced it (the client left while the head was being
			// written): set it again, or the read below would wait out
			// the whole header timeout. A hook that runs after this check
			// comes after the deadline above, so its own deadline stands.
			c.setPastDeadline()
		}
	}
	c.readLimit = maxResponseHeaderBytes
	if _, err := c.br.Peek(1); err != nil {
		if staleCause(err) {
			err = staleError{err}
		}
		return nil, err
	}
	if c.timing != nil {
		c.timing.FirstByte = time.Since(sent)
	}
	var resp *http.Response
	for {
		if resp = c.fastHead(r); resp == nil {
			resp, err = http.ReadResponse(c.br, r)
			if err != nil {
				return nil, err
			}
		}
		if resp.StatusCode >= 200 {
			break
		}
		if resp.StatusCode < 100 {
			return nil, errBadStatus
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return nil, errUnexpectedSwitch
		}
		// An interim response (100 Continue, 103 Early Hints) has no
		// body and the final response follows. The header limit spans
		// them all, which bounds how many there can be.
	}
	if c.reused && resp.StatusCode == http.StatusRequestTimeout && resp.Close {
		// A server that times out an idle keep-alive connection may say so
		// with a 408 before closing; it answers no request of ours.
		return nil, staleError{errIdle408}
	}
	c.readLimit = math.MaxInt64 // the head's deadline stays until a body read needs the socket (Read)
	return resp, nil
}

// release ends the current request on c: c goes back to the pool when
// reuse is set and nothing spoils it, otherwise it is closed.
func (c *h1Conn) release(reuse bool) {
	if !c.stopHook() {
		reuse = false // the abort hook ran: the deadline is in the past
	}
	c.body = h1Body{}
	if reuse && c.br.Buffered() > 0 {
		reuse = false // bytes beyond the response: the framing is off
	}
	if !reuse || !c.pool.put(c, time.Now()) {
		_ = c.nc.Close()
	}
}
