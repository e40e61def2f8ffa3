// Package upstream is levee's client side: how one attempt of an inbound
// request reaches an endpoint. A Forwarder takes the inbound request itself
// plus what the attempt changes (Outbound), so each implementation builds
// what it sends from the request directly: the HTTP/1.1 fast path writes
// the request head straight from it without building an outbound
// *http.Request, and net/http's transport gets one built by
// OutboundRequest. HTTP/2, TLS and gRPC upstreams, and data sources, plug
// in here as further Forwarders.
//
// The package knows nothing of routes or retries: an attempt's error is
// returned as is and the request path classifies it; a forwarder that
// decides a request's answer itself (a data source) returns a *Refusal.
package upstream

import (
	"context"
	"io"
	"net"
	"net/http"
	"time"
)

// Outbound is what one attempt sends besides the inbound request: the
// endpoint, the request id and the body as this attempt reads it (a
// replayed buffer, or the client's body behind a guard), with the trailers
// the request path allows. Passed by value: it costs no allocation.
type Outbound struct {
	// Addr is the endpoint's host:port.
	Addr string
	// RequestID is sent as X-Request-Id.
	RequestID string
	// ForwardedFor is the X-Forwarded-For sent when the request came
	// through a trusted proxy (the proxy's client address: the chain from
	// the client to the peer); the client's Forwarded header is then kept.
	// "": the peer's address alone, and no Forwarded: a client-sent
	// X-Forwarded-For or Forwarded never reaches the upstream.
	ForwardedFor string
	// Body and Length are the attempt's body (nil and 0: none).
	Body   io.ReadCloser
	Length int64
	// Trailer is the outbound trailer map (filled when the body ends), or
	// nil; never the inbound request's own Trailer.
	Trailer http.Header
	// Timing, when set, receives the attempt's connect and first-byte
	// times (for the access log); nil measures nothing.
	Timing *Timing
	// Caller is the request's verified identity, for a forwarder that
	// binds it (a data route's `from:`); zero on a route without auth. A
	// value, not a pointer: the request's state stays off the heap.
	Caller Caller
	// Usage, when set, is the caller's row and byte quota, charged as
	// the answer streams (nil: none, the fast path).
	Usage Usage
}

// Caller is a request's verified identity.
type Caller struct {
	// App is the authenticated app's id.
	App string
	// Subject is the JWT's sub ("" without a JWT).
	Subject string
	// Claims are the JWT claims the route binds, as text (jwtauth's
	// Identity.Claims); nil when it binds none.
	Claims map[string]string
}

// Usage charges an answer to its caller's row and byte quotas as it
// streams. The proxy counts a proxied answer's body bytes itself; a
// forwarder that counts its own answer (a data route: rows and the bytes
// of rows as written) calls Own first.
type Usage interface {
	// Take charges rows and bytes; false when they do not fit (nothing
	// charged, and the quota is then used up: the answer must end there).
	Take(rows, bytes int64) bool
	// Own says the forwarder charges its answer itself.
	Own()
}

// Forwarder sends one attempt of an inbound request to an endpoint and
// returns the response with its head read. The caller closes the body
// exactly once. ctx bounds the attempt (per-try timeout, the client
// leaving). Implementations are safe for concurrent use.
type Forwarder interface {
	Forward(ctx context.Context, r *http.Request, o Outbound) (*http.Response, error)
}

// Options are the settings of one upstream's connection pools.
type Options struct {
	// Connect bounds establishing a TCP connection to an endpoint.
	Connect time.Duration
	// ResponseHeader bounds the wait, after the request is written, for the
	// endpoint's response headers.
	ResponseHeader time.Duration
	// Idle is how long an unused pooled connection is kept; 0 keeps it
	// until the endpoint closes it.
	Idle time.Duration
	// MaxIdlePerEndpoint bounds pooled idle connections per endpoint, in
	// each of the two pools; 0 means 2 (net/http's default).
	MaxIdlePerEndpoint int
	// TLS, when set, makes every connection TLS (tls.go); Connect then
	// bounds the TCP connect and the handshake together. nil: clear text.
	TLS *ClientTLS
	// Protocol is what is spoken to the endpoints (protocol.go); the zero
	// value is HTTP/1.1. ProtoHTTP2 and ProtoAuto need TLS, ProtoH2C
	// refuses it.
	Protocol Protocol
	// HTTP2 are the HTTP/2 pool's limits (h2.go), for every protocol but
	// ProtoHTTP1.
	HTTP2 H2Options
}

// Equal reports whether o and p give the same transport: the same
// settings and, with TLS, the same TLS options and file contents.
func (o Options) Equal(p Options) bool {
	ot, pt := o.TLS, p.TLS
	o.TLS, p.TLS = nil, nil
	return o == p && ot.same(pt)
}

// Transport is one upstream's HTTP/1.1 connection pools: a fast path of
// levee's own for bodiless idempotent requests (see h1.go) and an
// http.Transport for everything else (bodies, upgrades, other methods).
// Safe for concurrent use; build it with NewTransport.
type Transport struct {
	std *http.Transport
	// rt is std (HTTP/2 requests go to h2, never to it).
	rt http.RoundTripper
	h1 *h1Pool
	// fast: bodiless idempotent requests take h1 (HTTP/1.1 upstreams).
	fast bool
	// dial opens a connection to an endpoint (with TLS when configured);
	// both pools dial through it.
	dial func(ctx context.Context, addr string) (net.Conn, error)
	// h2, for HTTP/2 upstreams (h2.go), takes every request; with
	// ProtoAuto only those to endpoints not known to speak HTTP/1.1 only.
	h2 *h2Pool
	// auto: ProtoAuto; h1Only remembers the endpoints that chose
	// http/1.1 by ALPN (auto.go).
	auto           bool
	h1Only         autoMemory
	responseHeader time.Duration
}

// NewTransport returns the HTTP/1.1 transport levee uses to reach an
// upstream's endpoints: keep-alive pooling, no environment proxies, no
// transparent compression (bodies pass through untouched). It starts no
// goroutine; call SweepIdle periodically to close expired idle connections
// of the fast path.
func NewTransport(o Options) *Transport {
	d := &net.Dialer{Timeout: o.Connect, KeepAlive: 30 * time.Second}
	t := &Transport{}
	t.dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	var tlsDial func(ctx context.Context, addr string) (net.Conn, error)
	if c := o.TLS; c != nil {
		t.dial = func(ctx context.Context, addr string) (net.Conn, error) {
			return dialTLS(ctx, d, c, addr, o.Connect, nil)
		}
		if o.Protocol == ProtoHTTP2 || o.Protocol == ProtoAuto {
			alpn := o.Protocol.alpn()
			tlsDial = func(ctx context.Context, addr string) (net.Conn, error) {
				return dialTLS(ctx, d, c, addr, o.Connect, alpn)
			}
		}
	}
	std := &http.Transport{
		Proxy: nil,
		// With TLS this dial returns a *tls.Conn past its handshake for
		// the request's "http" URL: net/http speaks HTTP/1.1 over it.
		DialContext:            func(ctx context.Context, _, addr string) (net.Conn, error) { return t.dial(ctx, addr) },
		MaxIdleConns:           0, // bounded per endpoint below
		MaxIdleConnsPerHost:    o.MaxIdlePerEndpoint,
		IdleConnTimeout:        o.Idle,
		ResponseHeaderTimeout:  o.ResponseHeader,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		ForceAttemptHTTP2:      false,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
	configure(std, o.Protocol, tlsDial)
	t.std, t.rt, t.h1, t.fast = std, std, newH1Pool(o, t.dial), o.Protocol == ProtoHTTP1
	t.responseHeader = o.ResponseHeader
	switch o.Protocol {
	case ProtoH2C:
		t.h2 = newH2Pool(o.HTTP2, false, o.Idle, o.Connect, t.dial)
	case ProtoHTTP2, ProtoAuto:
		if tlsDial != nil {
			t.auto = o.Protocol == ProtoAuto
			t.h2 = newH2Pool(o.HTTP2, true, o.Idle, o.Connect, func(ctx context.Context, addr string) (net.Conn, error) {
				c, err := tlsDial(ctx, addr)
				if err == nil && !h2Negotiated(c) {
					_ = c.Close()
					return nil, errNoH2
				}
				return c, err
			})
		}
	}
	return t
}

// OnH2Error sets the function called with an endpoint and a reason
// (H2Reasons) when its HTTP/2 connection is closed by the frame guard or
// sent a GOAWAY. Call it before the transport is used; f must not block.
func (t *Transport) OnH2Error(f func(addr, reason string)) {
	if t.h2 != nil {
		t.h2.onError.Store(&f)
	}
}

// Dial opens a connection to the endpoint at addr as the transport's
// pools do (TCP, then TLS when the upstream has it), for health checks.
func (t *Transport) Dial(ctx context.Context, addr string) (net.Conn, error) {
	return t.dial(ctx, addr)
}

// Forward sends a bodiless idempotent request (FastPath) on the fast-path
// pool and everything else through the standard http.Transport.
func (t *Transport) Forward(ctx context.Context, r *http.Request, o Outbound) (*http.Response, error) {
	if t.fast && o.Length == 0 && FastPath(r) {
		return t.h1.roundTrip(ctx, r, o.Addr, o.RequestID, o.ForwardedFor, o.Timing)
	}
	if t.h2 != nil && !(t.auto && t.h1Only.has(o.Addr, time.Now())) {
		return t.forwardH2(ctx, r, o)
	}
	var resp *http.Response
	var err error
	if o.Timing != nil {
		resp, err = roundTripTimed(ctx, t.rt, r, o)
	} else {
		resp, err = t.rt.RoundTrip(OutboundRequest(ctx, r, o))
	}
	if err != nil {
		err = asTLSError(err) // an endpoint's TLS alert before its response
	}
	return resp, err
}

// Standard returns a Forwarder that sends every request through t's
// standard http.Transport, never the fast path (to compare the two).
func (t *Transport) Standard() Forwarder { return RoundTripper{t.rt} }

// CloseIdleConnections closes the idle connections of both pools.
// Connections in use stay open and are pooled again when their request ends.
func (t *Transport) CloseIdleConnections() {
	if t.h2 != nil {
		t.h2.closeIdle()
	}
	t.h1.closeIdle()
	t.std.CloseIdleConnections()
}

// Close closes the idle connections of both pools and retires the fast
// path's: connections that requests in flight give back later are closed
// instead of pooled. Call it when no new request will use t (the upstream
// was removed, its settings changed, or levee is stopping).
func (t *Transport) Close() {
	if t.h2 != nil {
		t.h2.close()
	}
	t.h1.close()
	t.std.CloseIdleConnections()
}

// SweepIdle closes the fast path's connections that have been idle for the
// Idle duration or longer at now, and returns how many it closed. (The
// standard pool expires its own with timers.) It does not block on I/O
// beyond closing sockets.
func (t *Transport) SweepIdle(now time.Time) int { return t.h1.sweep(now) }

// IdleConns returns the number of idle fast-path connections to addr.
func (t *Transport) IdleConns(addr string) int { return t.h1.idleCount(addr) }

// RoundTripper forwards through any http.RoundTripper, with the request
// OutboundRequest builds.
type RoundTripper struct{ http.RoundTripper }

// Forward implements Forwarder.
func (rt RoundTripper) Forward(ctx context.Context, r *http.Request, o Outbound) (*http.Response, error) {
	if o.Timing != nil {
		return roundTripTimed(ctx, rt.RoundTripper, r, o)
	}
	return rt.RoundTrip(OutboundRequest(ctx, r, o))
}
