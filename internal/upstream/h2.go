//lint:file-ignore SA1019 x/net/http2's client connections are deprecated for net/http's Transport.NewClientConn, which dials itself and reads ALPN only from a *tls.Conn: the pool and its frame guard (h2guard.go) need a ClientConn over a net.Conn of ours, which only x/net's gives.

package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// HTTP/2 to upstreams (ProtoHTTP2, ProtoH2C, and ProtoAuto when the
// endpoint picks h2 by ALPN) goes through a pool of levee's own, h2Pool,
// over golang.org/x/net/http2's client connections: net/http's transport
// cannot bound HTTP/2 connections per endpoint (MaxConnsPerHost let 3
// connections open for 8 requests with a bound of 1) and its own
// connection pool is not replaceable; x/net/http2's ClientConn, made from
// a net.Conn of ours, can be pooled by us and lets the frame guard
// (h2guard.go) sit under it. The pool bounds, per endpoint:
//
//   - connections: at most H2Options.MaxConnsPerEndpoint, dialing ones
//     included (a connection that is closing counts until it is closed);
//   - streams per connection: at most the smaller of
//     H2Options.MaxConcurrentStreams and the endpoint's own
//     SETTINGS_MAX_CONCURRENT_STREAMS (StrictMaxConcurrentStreams: x/net
//     waits rather than exceed a lowered limit);
//   - waiting requests: a request that finds every stream slot taken and
//     no connection left to dial waits for a slot until its context ends
//     (the per-try timeout, the client leaving), while the endpoint's
//     requests in the pool (in flight, waiting, dialing) are fewer than
//     2 × MaxConnsPerEndpoint × MaxConcurrentStreams (as many waiting as
//     the connections can carry); one more is refused at once with
//     ErrH2Saturated, which the request path sees as
//     a failed connect (the request never reached the endpoint: retried
//     per the route's rules on another endpoint).

// Defaults of H2Options (the config's defaults are these).
const (
	DefaultH2MaxConnsPerEndpoint  = 4
	DefaultH2MaxConcurrentStreams = 100
	DefaultH2ReadIdleTimeout      = 30 * time.Second
	DefaultH2PingTimeout          = 15 * time.Second
	DefaultH2MaxHeaderListSize    = 1 << 20
)

// H2Options are the HTTP/2 limits of one upstream's pool; a zero field
// takes its default.
type H2Options struct {
	// MaxConnsPerEndpoint bounds the connections to one endpoint.
	MaxConnsPerEndpoint int
	// MaxConcurrentStreams bounds the streams open on one connection.
	MaxConcurrentStreams int
	// ReadIdleTimeout: a connection that received no frame for this long
	// is sent a PING; PingTimeout later without its answer it is closed.
	ReadIdleTimeout time.Duration
	PingTimeout     time.Duration
	// MaxHeaderListSize bounds a response's header list (the
	// SETTINGS_MAX_HEADER_LIST_SIZE levee sends), in bytes.
	MaxHeaderListSize uint32
}

func (o H2Options) withDefaults() H2Options {
	if o.MaxConnsPerEndpoint <= 0 {
		o.MaxConnsPerEndpoint = DefaultH2MaxConnsPerEndpoint
	}
	if o.MaxConcurrentStreams <= 0 {
		o.MaxConcurrentStreams = DefaultH2MaxConcurrentStreams
	}
	if o.ReadIdleTimeout <= 0 {
		o.ReadIdleTimeout = DefaultH2ReadIdleTimeout
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = DefaultH2PingTimeout
	}
	if o.MaxHeaderListSize == 0 {
		o.MaxHeaderListSize = DefaultH2MaxHeaderListSize
	}
	return o
}

// ErrH2Saturated refuses a request that found every stream of every
// allowed connection to its endpoint taken and the wait list full. It is
// wrapped in a *net.OpError of Op "dial": the request never reached the
// endpoint.
var ErrH2Saturated = errors.New("upstream: every HTTP/2 stream to the endpoint is taken")

// errNoSettings is a connection whose endpoint sent no SETTINGS frame
// within the connect timeout.
var errNoSettings = errors.New("upstream: the endpoint sent no HTTP/2 SETTINGS")

// h2Pool is the HTTP/2 connection pool of one upstream (see above).
type h2Pool struct {
	t2           *http2.Transport
	settingsWait time.Duration // bounds the wait for the endpoint's SETTINGS
	idle         time.Duration // closes a connection idle this long
	o            H2Options
	tls          bool
	dial         func(ctx context.Context, addr string) (net.Conn, error)

	// onError, when set, is called with the endpoint and a reason
	// (H2Reasons) each time the guard closes or counts a connection.
	onError atomic.Pointer[func(addr, reason string)]

	mu     sync.Mutex
	eps    map[string]*h2Endpoint
	closed bool
}

// h2Endpoint is the pool's state for one endpoint, under h2Pool.mu.
type h2Endpoint struct {
	conns   []*h2Conn
	dialing int
	waiting int
	// changed is closed (and replaced) when a slot may have freed: a
	// stream ended, a connection was added or dropped.
	changed chan struct{}
}

type h2Conn struct {
	cc       *http2.ClientConn
	inflight int // streams this pool let onto cc that have not ended
}

// newH2Pool returns the pool; dial opens a connection ready for HTTP/2
// (TLS with ALPN h2 done, or clear text for h2c).
func newH2Pool(o H2Options, overTLS bool, idle, connect time.Duration, dial func(ctx context.Context, addr string) (net.Conn, error)) *h2Pool {
	o = o.withDefaults()
	p := &h2Pool{o: o, tls: overTLS, dial: dial, settingsWait: connect, idle: idle, eps: map[string]*h2Endpoint{}}
	p.t2 = p.transport(nil)
	return p
}

// transport returns an x/net client transport with the pool's settings,
// whose framing errors call countError (nil: none). The pool makes one per
// connection, so that x/net's error counts name the endpoint.
func (p *h2Pool) transport(countError func(string)) *http2.Transport {
	return &http2.Transport{
		AllowHTTP:                  !p.tls,
		DisableCompression:         true,
		StrictMaxConcurrentStreams: true,
		IdleConnTimeout:            p.idle,
		ReadIdleTimeout:            p.o.ReadIdleTimeout,
		PingTimeout:                p.o.PingTimeout,
		MaxHeaderListSize:          p.o.MaxHeaderListSize,
		CountError:                 countError,
	}
}

func (p *h2Pool) endpoint(addr string) *h2Endpoint {
	ep := p.eps[addr]
	if ep == nil {
		ep = &h2Endpoint{changed: make(chan struct{})}
		p.eps[addr] = ep
	}
	return ep
}

// requests counts the endpoint's requests in the pool: streams in flight,
// requests waiting and requests dialing. Called with p.mu held.
func (ep *h2Endpoint) requests() int {
	n := ep.waiting + ep.dialing
	for _, c := range ep.conns {
		n += c.inflight
	}
	return n
}

func (ep *h2Endpoint) notify() {
	close(ep.changed)
	ep.changed = make(chan struct{})
}

// prune drops ep's connections that are closed, or closing with no stream
// of ours left (closing those), and reports whether any was dropped.
// Called with p.mu held.
func (ep *h2Endpoint) prune() bool {
	kept := ep.conns[:0]
	for _, c := range ep.conns {
		st := c.cc.State()
		if st.Closed || st.Closing && c.inflight == 0 {
			if !st.Closed {
				_ = c.cc.Close()
			}
			continue
		}
		kept = append(kept, c)
	}
	dropped := len(kept) < len(ep.conns)
	clear(ep.conns[len(kept):])
	ep.conns = kept
	return dropped
}

// acquire returns a connection to addr with a stream reserved for one
// request, dialing one when the bounds allow, else waiting for a slot
// within ctx.
func (p *h2Pool) acquire(ctx context.Context, addr string) (*h2Conn, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: net.ErrClosed}
		}
		ep := p.endpoint(addr)
		if ep.prune() {
			ep.notify()
		}
		for _, c := range ep.conns {
			limit := p.o.MaxConcurrentStreams
			if m := c.cc.State().MaxConcurrentStreams; m != 0 && int(m) < limit {
				limit = int(m)
			}
			if c.inflight < limit && c.cc.ReserveNewRequest() {
				c.inflight++
				p.mu.Unlock()
				return c, nil
			}
		}
		if len(ep.conns)+ep.dialing < p.o.MaxConnsPerEndpoint {
			ep.dialing++
			p.mu.Unlock()
			c, err := p.connect(ctx, addr)
			p.mu.Lock()
			ep.dialing--
			if err != nil {
				ep.notify()
				p.mu.Unlock()
				return nil, err
			}
			if p.closed {
				p.mu.Unlock()
				_ = c.cc.Close()
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: net.ErrClosed}
			}
			ep.conns = append(ep.conns, c)
			ep.notify()
			p.mu.Unlock()
			continue // take a stream as any other request would
		}
		if ep.requests() >= 2*p.o.MaxConnsPerEndpoint*p.o.MaxConcurrentStreams {
			p.mu.Unlock()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ErrH2Saturated}
		}
		ep.waiting++
		ch := ep.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		p.mu.Lock()
		ep.waiting--
		p.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: context.Cause(ctx)}
		}
	}
}

// connect dials addr and starts an HTTP/2 client connection on it, behind
// the frame guard.
func (p *h2Pool) connect(ctx context.Context, addr string) (*h2Conn, error) {
	nc, err := p.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	g := newH2ClientGuard(nc, func(reason string) { p.countError(addr, reason) })
	cc, err := p.transport(func(errType string) {
		// x/net's own defences: a frame it refuses closes the
		// connection (a header block too large, a frame too large, ...).
		if strings.HasPrefix(errType, "read_frame_conn_error") {
			p.countError(addr, "protocol_error")
		}
	}).NewClientConn(g)
	if err != nil {
		_ = nc.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	// The endpoint's SETTINGS (its stream limit) before the first stream:
	// x/net would otherwise open up to 100 streams on a connection whose
	// endpoint allows fewer, and the excess is refused. An endpoint that
	// sends none within the connect timeout is a failed connect.
	wait := ctx
	if p.settingsWait > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, p.settingsWait)
		defer cancel()
	}
	select {
	case <-g.ready:
	case <-g.dead:
		_ = cc.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errH2Guard}
	case <-wait.Done():
		_ = cc.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errNoSettings}
	}
	return &h2Conn{cc: cc}, nil
}

func (p *h2Pool) countError(addr, reason string) {
	if f := p.onError.Load(); f != nil {
		(*f)(addr, reason)
	}
}

// release gives back c's stream.
func (p *h2Pool) release(addr string, c *h2Conn) {
	p.mu.Lock()
	c.inflight--
	if ep := p.eps[addr]; ep != nil {
		if c.inflight == 0 {
			ep.prune()
		}
		ep.notify()
		if len(ep.conns) == 0 && ep.dialing == 0 && ep.waiting == 0 {
			delete(p.eps, addr) // bounded by the endpoints in use
		}
	}
	p.mu.Unlock()
}

// roundTrip sends req (its URL's host is the endpoint) on a pooled
// connection. headerTimeout > 0 bounds the wait for the response head.
func (p *h2Pool) roundTrip(req *http.Request, addr string, headerTimeout time.Duration) (*http.Response, error) {
	c, err := p.acquire(req.Context(), addr)
	if err != nil {
		return nil, err
	}
	if p.tls {
		req.URL.Scheme = "https"
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	var timer *time.Timer
	if headerTimeout > 0 {
		timer = time.AfterFunc(headerTimeout, func() { cancel(errH2HeaderTimeout) })
	}
	resp, err := c.cc.RoundTrip(req.WithContext(ctx))
	if timer != nil && !timer.Stop() && err != nil && errors.Is(context.Cause(ctx), errH2HeaderTimeout) {
		err = errH2HeaderTimeout
	}
	if err != nil {
		if strings.Contains(err.Error(), "header list larger than") {
			// x/net stopped decoding at MaxHeaderListSize and reset the
			// stream; an endpoint that sends such answers gets no more
			// streams on this connection.
			c.cc.SetDoNotReuse()
			p.countError(addr, "header_list_too_large")
		}
		cancel(nil)
		p.release(addr, c)
		return nil, err
	}
	resp.Body = &h2Body{rc: resp.Body, done: func() { cancel(nil); p.release(addr, c) }}
	return resp, nil
}

// errH2HeaderTimeout is a response head that took longer than
// Options.ResponseHeader: a net.Error timeout, as net/http's own.
var errH2HeaderTimeout error = h2Timeout{}

type h2Timeout struct{}

func (h2Timeout) Error() string   { return "upstream: timeout awaiting HTTP/2 response headers" }
func (h2Timeout) Timeout() bool   { return true }
func (h2Timeout) Temporary() bool { return true }

// h2Body gives the stream back to the pool when closed (once).
type h2Body struct {
	rc   io.ReadCloser
	once sync.Once
	done func()
}

func (b *h2Body) Read(p []byte) (int, error) { return b.rc.Read(p) }

func (b *h2Body) Close() error {
	err := b.rc.Close()
	b.once.Do(b.done)
	return err
}

// closeIdle closes the connections with no stream of ours.
func (p *h2Pool) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, ep := range p.eps {
		kept := ep.conns[:0]
		for _, c := range ep.conns {
			if c.inflight == 0 {
				_ = c.cc.Close()
				continue
			}
			kept = append(kept, c)
		}
		clear(ep.conns[len(kept):])
		ep.conns = kept
		ep.notify()
		if len(ep.conns) == 0 && ep.dialing == 0 && ep.waiting == 0 {
			delete(p.eps, addr)
		}
	}
}

// close closes idle connections and makes busy ones close when their
// streams end (x/net's Shutdown-like retirement: no new stream is taken).
func (p *h2Pool) close() {
	p.mu.Lock()
	p.closed = true
	for _, ep := range p.eps {
		for _, c := range ep.conns {
			if c.inflight == 0 {
				_ = c.cc.Close()
			} else {
				c.cc.SetDoNotReuse()
			}
		}
		ep.notify()
	}
	p.mu.Unlock()
}

// connCount returns the number of pooled connections to addr that are
// still open (tests). A connection the guard closed after its last
// request was released stays in the pool until the next acquire prunes
// it, so it is not counted here.
func (p *h2Pool) connCount(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	if ep := p.eps[addr]; ep != nil {
		for _, c := range ep.conns {
			if st := c.cc.State(); !st.Closed && !st.Closing {
				n++
			}
		}
	}
	return n
}

// RefusedStream reports whether err is an HTTP/2 endpoint's RST_STREAM
// REFUSED_STREAM (the request was not processed: RFC 9113 section 8.7).
func RefusedStream(err error) bool {
	var se http2.StreamError
	return errors.As(err, &se) && se.Code == http2.ErrCodeRefusedStream
}

// h2Negotiated reports whether a TLS connection agreed on h2 by ALPN.
func h2Negotiated(c net.Conn) bool {
	tc, ok := c.(*tls.Conn)
	return ok && tc.ConnectionState().NegotiatedProtocol == http2.NextProtoTLS
}
