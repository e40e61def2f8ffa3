// Package proxy is levee's request path: it matches a request to a route,
// picks an endpoint of the route's upstream, forwards the request with its
// body streamed both ways, and streams the answer back. Every answer levee
// writes itself (no route, no endpoint, upstream failures, limits) goes
// through Refuse, the one place that maps a Reason to HTTP.
//
// The path reads an immutable Table from an atomic pointer once per
// request; reloads swap the pointer and never block a request.
package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/auth"
	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/memguard"
	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/telemetry"
	"github.com/levee-gw/levee/internal/upstream"
)

// Options configure a Handler. Metrics is required; the rest may be zero.
type Options struct {
	Metrics *Metrics
	// AccessLog receives one entry per request; nil disables the access log.
	AccessLog *telemetry.AccessLog
	// Logger receives errors that are not a request's own (nil: discard).
	Logger *slog.Logger
	// MaxHeaderBytes bounds the request line plus headers, counted as on
	// the wire; larger requests get 431 header_too_large. 0: no check here
	// (the http.Server's own limit still applies).
	MaxHeaderBytes int
	// Memory, when set, sheds work under memory pressure: sheddable
	// requests above its soft watermark, all but critical above the hard.
	Memory *memguard.Guard
	// UnderscoresInHeaders is what becomes of request headers whose name
	// holds "_" (framing.go); the zero value drops them.
	UnderscoresInHeaders UnderscoreMode
}

// Handler is the data plane's http.Handler. Safe for concurrent use.
type Handler struct {
	table     atomic.Pointer[Table]
	metrics   *Metrics
	accessLog *telemetry.AccessLog
	logger    *slog.Logger
	maxHeader int
	memory    *memguard.Guard
	// underscores: Options.UnderscoresInHeaders
	underscores UnderscoreMode

	upgrades  upgradeSet
	consumers *consumerState
}

// NewHandler returns a Handler serving t.
func NewHandler(t *Table, o Options) (*Handler, error) {
	if o.Metrics == nil {
		return nil, errors.New("proxy: Options.Metrics is required")
	}
	if t == nil {
		return nil, errors.New("proxy: nil table")
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cs, err := newConsumerState()
	if err != nil {
		return nil, err
	}
	h := &Handler{metrics: o.Metrics, accessLog: o.AccessLog, logger: logger, maxHeader: o.MaxHeaderBytes, memory: o.Memory, consumers: cs,
		underscores: o.UnderscoresInHeaders}
	h.upgrades.conns = make(map[io.Closer]struct{})
	h.table.Store(t)
	return h, nil
}

// Swap makes t the table for every request that starts from now on.
// Requests in flight finish on the table they started with.
func (h *Handler) Swap(t *Table) { h.table.Store(t) }

// Table returns the table currently serving.
func (h *Handler) Table() *Table { return h.table.Load() }

// exchange is what one request accumulates for its metrics and access log.
type exchange struct {
	start    time.Time
	route    *Route
	endpoint string
	status   int
	reason   Reason
	bytesOut int64
	reqID    string
	attempts int
	app      *App
	sentPath string // the path as sent, when normalising changed it
	prio     admission.Priority
	reserved int64 // bytes of the memory budget held (memory.go)
}

// ServeHTTP serves one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := exchange{start: time.Now()}
	h.metrics.inflight.Inc()
	defer h.finish(&x, r)

	x.reqID = requestID(r.Header)
	w.Header()["X-Request-Id"] = []string{x.reqID}

	t := h.table.Load()
	x.route = t.noRoute
	if h.maxHeader > 0 && headerSize(r) > h.maxHeader {
		h.refuse(w, &x, ReasonHeaderTooLarge)
		return
	}
	if !h.screenHeaders(r.Header) {
		h.refuse(w, &x, ReasonBadHeaderName)
		return
	}
	rt, ok, allow, badPath, sentPath := t.routeRequest(r)
	if badPath {
		h.refuse(w, &x, ReasonBadPath)
		return
	}
	if ok && r.Method == http.MethodConnect && !connectAllowed(rt, ok) {
		w.Header()["Allow"] = allowAllButConnect
		h.refuse(w, &x, ReasonMethodNotAllowed)
		return
	}
	if !ok {
		if allow != nil {
			w.Header()["Allow"] = allow // built with the table (RFC 9110 section 15.5.6)
			h.refuse(w, &x, ReasonMethodNotAllowed)
		} else {
			h.refuse(w, &x, ReasonNoRoute)
		}
		return
	}
	x.route = rt
	if rt.MaxBodyBytes > 0 {
		if r.ContentLength > rt.MaxBodyBytes {
			h.refuse(w, &x, ReasonBodyTooLarge)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, rt.MaxBodyBytes)
		}
	}
	screenUpgrade(r.Header, rt.Upgrades)
	screenTrailers(r, rt.ForwardTrailers)
	if _, spoofed := r.Header[AppHeader]; spoofed {
		delete(r.Header, AppHeader) // only levee names the app to an upstream
	}
	consumer := ""
	if rt.Auth != AuthNone || rt.AnonymousLimit != (ratelimit.Policy{}) {
		x.sentPath = sentPath
		if !h.admitConsumer(w, r, &x, rt) {
			return
		}
		if x.app != nil {
			consumer = x.app.ID
			if c := x.app.MaxConcurrency; c > 0 {
				if x.app.counters.inflight.Add(1) > int64(c) {
					x.app.counters.inflight.Add(-1)
					h.shed(w, &x, ReasonConsumerLimit, consumerRetryAfter)
					return
				}
				defer x.app.counters.inflight.Add(-1)
			}
		}
	}
	up := rt.Upstream
	prio := rt.Priority
	if isClientRetry(r.Header) {
		prio = admission.Sheddable
	}
	x.prio = prio
	if h.memory != nil {
		if lvl := h.memory.Level(); (lvl == memguard.Soft && prio == admission.Sheddable) || (lvl == memguard.Hard && prio != admission.Critical) {
			h.shed(w, &x, ReasonMemoryPressure, 0)
			return
		}
	}
	if up.Admission != nil {
		if consumer == "" {
			consumer = consumerKey(r)
		}
		rel, err := up.Admission.Acquire(r.Context(), consumer, prio)
		if err != nil {
			if ref, ok := err.(*admission.Refusal); ok { // Acquire returns it unwrapped
				h.shed(w, &x, Reason(ref.Reason), ref.RetryAfter)
			} else {
				x.status = statusClientClosed // the client left while queued
			}
			return
		}
		defer func() { rel.Done(admissionOutcome(&x)) }()
	}
	ep, err := pick(up, r)
	if err != nil {
		if !errors.Is(err, balance.ErrNoEndpoint) {
			h.logger.Error("picker failed", "upstream", up.Name, "error", err)
		}
		h.refuse(w, &x, ReasonNoAvailableEndpoint)
		return
	}
	h.forward(w, r, &x, rt, ep)
}

func (h *Handler) finish(x *exchange, r *http.Request) {
	h.releaseMemory(x)
	h.metrics.inflight.Dec()
	d := time.Since(x.start)
	rm := x.route.metrics
	rm.count(x.status)
	appID := ""
	if x.app != nil {
		appID = x.app.ID
		x.app.counters.byClass[classOf(x.status)].Add(1)
	}
	rm.duration.Observe(d.Seconds())
	if h.accessLog != nil {
		e := telemetry.AccessEntry{
			Time: x.start, RequestID: x.reqID, Client: r.RemoteAddr, Method: r.Method,
			Host: r.Host, Path: r.URL.Path, Proto: r.Proto, Status: x.status,
			Route: x.route.Name, Upstream: x.route.Upstream.Name, Endpoint: x.endpoint,
			Reason: string(x.reason), BytesOut: x.bytesOut, Duration: d, Attempts: x.attempts,
			App: appID,
		}
		h.accessLog.Log(&e)
	}
}

// shed refuses work that admission control turned away (counted in
// levee_shed_total as well as levee_refusals_total), with a jittered
// Retry-After when retryAfter > 0.
func (h *Handler) shed(w http.ResponseWriter, x *exchange, reason Reason, retryAfter time.Duration) {
	x.reason = reason
	x.status = RefuseRetryAfter(w, reason, retryAfter)
	x.route.metrics.refused(reason)
	x.route.metrics.shed(reason)
}

// consumerRetryAfter is the Retry-After of a per-app concurrency refusal:
// a slot frees as soon as one of the app's own requests ends.
const consumerRetryAfter = time.Second

// admitConsumer authenticates the caller of a route with auth, checks its
// grant and applies the rate limits of the app, or of the client address
// on an anonymous route with AnonymousLimit. It sets x.app, the RateLimit
// headers on every answer of a limited route, the app header upstream, and
// removes the caller's levee credentials from what the upstream sees. It
// returns false after writing a refusal.
func (h *Handler) admitConsumer(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route) bool {
	now := time.Now()
	if rt.Auth != AuthNone {
		app, reason, detail := h.identify(r, x, rt, h.consumers.apps.Load(), now)
		if app == nil {
			if reason == ReasonMemoryPressure {
				h.shed(w, x, reason, 0)
				return false
			}
			if reason == ReasonUnauthenticated {
				w.Header()["Www-Authenticate"] = challenge(rt.Auth)
			}
			x.reason = reason
			x.status = RefuseDetail(w, reason, detail)
			x.route.metrics.refused(reason)
			return false
		}
		x.app = app
		delete(r.Header, "X-Api-Key")
		delete(r.Header, "Authorization")
		r.Header[AppHeader] = app.header
	}
	d, limited := h.limit(r, rt, x.app, now)
	if !limited {
		return true
	}
	d.SetHeaders(w.Header())
	if !d.Allowed {
		reason := ReasonRateLimited
		if d.Quota {
			reason = ReasonQuotaExhausted
		}
		x.reason = reason
		x.status = Refuse(w, reason)
		x.route.metrics.refused(reason)
		return false
	}
	return true
}

var (
	bearerChallenge = []string{`Bearer realm="levee"`}
	hmacChallenge   = []string{auth.SignatureScheme + ` realm="levee"`}
)

// challenge is the WWW-Authenticate value a 401 on a route with mode
// carries (RFC 9110 section 11.6.1).
func challenge(mode AuthMode) []string {
	if mode == AuthHMAC {
		return hmacChallenge
	}
	return bearerChallenge
}

// isClientRetry reports whether the client marked the request as a retry
// (Levee-Attempt above 1, as the levee client package sends).
func isClientRetry(h http.Header) bool {
	v := h["Levee-Attempt"]
	return len(v) > 0 && v[0] != "" && v[0] != "1"
}

// consumerKey names who a request is from, for fair queueing: the client
// address (the authenticated app takes its place once apps exist).
func consumerKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// admissionOutcome tells the limiter how an admitted request ended: the
// upstream's failures are congestion signals, a client that left gives no
// sample.
func admissionOutcome(x *exchange) admission.Outcome {
	switch {
	case x.status == statusClientClosed || x.status == 0 || x.reason == ReasonBadRequest:
		return admission.Dropped // says nothing about the upstream
	case x.reason == ReasonUpstreamTimeout || x.reason == ReasonUpstreamUnavailable || x.status == http.StatusServiceUnavailable:
		return admission.Failure
	}
	return admission.Success
}

func (h *Handler) refuse(w http.ResponseWriter, x *exchange, reason Reason) {
	x.reason = reason
	x.status = Refuse(w, reason)
	x.route.metrics.refused(reason)
}

// statusClientClosed is recorded (never sent) when the client went away
// before the answer was ready, following NGINX's convention.
const statusClientClosed = 499

// forward sends r to ep and, when the route's retry policy allows, to
// other endpoints after failures, then streams the answer to w.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route, ep *endpoint.Endpoint) {
	up := rt.Upstream
	if up.Budget != nil {
		up.Budget.Request(x.start)
	}
	var deadline time.Time
	if rt.Timeout > 0 {
		deadline = x.start.Add(rt.Timeout)
	}
	pol := rt.Retry
	if pol != nil && pol.Attempts < 2 {
		pol = nil
	}
	// With retries, a small body is buffered so it can be sent again; a
	// larger one streams and is only resent if no byte of it was read.
	var replay []byte
	var held *untouchedBody
	cb := watchClientBody(r)
	var tried triedSet // endpoints that failed in this request
	if pol != nil {
		var replayable bool
		var err error
		if replay, replayable, err = h.replayableBody(r, x, pol.ReplayBodyLimit); err != nil {
			h.clientBodyFailed(w, x, r, err)
			return
		}
		if !replayable {
			held = &untouchedBody{rc: r.Body}
		}
	}

	for n := 1; ; n++ {
		x.endpoint = ep.Address
		x.attempts = n
		now := time.Now()
		ctx, stopTimer, release := attemptContext(r.Context(), perTry(pol), deadline, now)
		body, length := r.Body, r.ContentLength
		switch {
		case replay != nil:
			body, length = io.NopCloser(bytes.NewReader(replay)), int64(len(replay))
		case held != nil:
			body = held
		}
		ep.Begin()
		resp, err := h.send(ctx, r, up, ep, x.reqID, body, length)
		if err == nil && !stopTimer() {
			// The timeout fired just as the headers came in: the attempt's
			// context is cancelled, so its body cannot be read.
			resp.Body.Close()
			resp, err = nil, errPerTryTimeout
		}
		rtt := time.Since(now)
		up.duration.Observe(rtt.Seconds())

		var fail failure
		status := 0
		if err != nil {
			if cerr := cb.failure(); cerr != nil {
				ep.End(endpoint.Abandoned) // the client's body broke the attempt
				release()
				h.clientBodyFailed(w, x, r, cerr)
				return
			}
			if r.Context().Err() != nil {
				ep.End(endpoint.Abandoned)
				release()
				x.status = statusClientClosed
				return
			}
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				ep.End(endpoint.Success)
				release()
				h.refuse(w, x, ReasonBodyTooLarge)
				return
			}
			ep.End(endpoint.Failure)
			fail = classifyFailure(ctx, err)
			if errors.Is(err, errPerTryTimeout) {
				fail = failTimeout
			}
			noteRefused(ep, err, now)
		} else {
			status = resp.StatusCode
		}
		if up.Observe != nil && fail != failConnect {
			// A connect failure's short time says nothing of latency (and
			// would make a dead endpoint look the fastest).
			up.Observe(ep, rtt, now.Add(rtt))
		}

		if retry, free := decideRetry(pol, n, r, fail, status, held); retry {
			wait, ok := retryWait(pol, resp, n, time.Now())
			if ok && (deadline.IsZero() || time.Now().Add(wait).Before(deadline)) {
				if free || up.Budget == nil || up.Budget.TryRetry(time.Now()) {
					if resp != nil {
						ep.EndStatus(resp.StatusCode)
						discard(resp)
					}
					release()
					h.metrics.retried(up.Name, fail, status)
					if !sleepCtx(r.Context(), wait) {
						x.status = statusClientClosed
						return
					}
					tried.add(ep)
					next, perr := pickRetry(up, &tried, time.Now())
					if perr != nil {
						h.refuse(w, x, ReasonNoAvailableEndpoint)
						return
					}
					ep = next
					continue
				}
				h.metrics.budgetExhausted.WithLabelValues(up.Name).Inc()
			}
		}

		if err != nil {
			release()
			if fail == failTimeout {
				h.refuse(w, x, ReasonUpstreamTimeout)
			} else {
				h.refuse(w, x, ReasonUpstreamUnavailable)
			}
			return
		}
		h.respond(w, r, x, ep, resp)
		release()
		return
	}
}

// retryable reports whether an attempt that ended in fail (or with an
// upstream status) may be sent again under pol.
func (h *Handler) retryable(pol *RetryPolicy, r *http.Request, fail failure, status int, held *untouchedBody) bool {
	switch {
	case fail == failConnect:
		// Nothing was sent: any method may go again, if its body is intact.
		return pol.OnConnectFailure && (held == nil || !held.read)
	case fail == failReset:
		if !pol.OnResetBeforeResponse {
			return false
		}
	case fail == failTimeout:
		if !pol.retriesStatus(http.StatusGatewayTimeout) {
			return false
		}
	default:
		if !pol.retriesStatus(status) {
			return false
		}
	}
	// The request was sent: only an idempotent request whose body (if any)
	// was buffered may be sent again.
	return idempotent(r) && held == nil
}

// send performs one attempt on ep through the upstream's forwarder.
func (h *Handler) send(ctx context.Context, r *http.Request, up *Upstream, ep *endpoint.Endpoint, reqID string, body io.ReadCloser, length int64) (*http.Response, error) {
	return up.Transport.Forward(ctx, r, upstream.Outbound{Addr: ep.Address, RequestID: reqID, Body: body, Length: length, Trailer: outboundTrailer(r)})
}

// clientBodyFailed answers when reading the client's body failed (to
// buffer it, or while an attempt forwarded it): over the route's limit
// (413), the client went away (499), the body was malformed or short
// (400 bad_request), or the memory budget had no room to buffer it
// (errNoMemory, a sheddable request: 503). None of these is an
// endpoint's failure.
func (h *Handler) clientBodyFailed(w http.ResponseWriter, x *exchange, r *http.Request, err error) {
	if err == errNoMemory {
		h.shed(w, x, ReasonMemoryPressure, 0)
		return
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.refuse(w, x, ReasonBodyTooLarge)
	case clientGone(err):
		x.status = statusClientClosed
	default:
		// Even when the request's context is cancelled (net/http cancels
		// it on a read error from the connection): a client that only
		// half-closed still reads, and an unwritten answer would be an
		// empty 200.
		h.refuse(w, x, ReasonBadRequest)
	}
}

// respond streams an upstream's answer to the client.
func (h *Handler) respond(w http.ResponseWriter, r *http.Request, x *exchange, ep *endpoint.Endpoint, resp *http.Response) {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		ep.EndStatus(resp.StatusCode)
		if !switchRequested(r.Header, resp.Header) {
			resp.Body.Close() // an upstream may not switch to what was not offered (framing.go)
			h.refuse(w, x, ReasonUpstreamUnavailable)
			return
		}
		x.status = http.StatusSwitchingProtocols
		h.serveUpgrade(w, r, resp)
		return
	}

	dst := w.Header()
	copyResponseHeader(dst, resp.Header)
	announceTrailers(dst, resp.Trailer)
	x.status = resp.StatusCode
	w.WriteHeader(resp.StatusCode)

	n, copyErr := copyBody(w, resp.Body, streaming(resp))
	x.bytesOut = n
	resp.Body.Close()
	if copyErr != nil {
		if r.Context().Err() != nil || copyErr.side == sideClient {
			ep.EndStatus(resp.StatusCode)
			return
		}
		// The endpoint broke off mid-body. The status is already sent, so the
		// only honest signal left is to abort the client's connection (or
		// stream) so that the truncation cannot pass for a complete answer.
		ep.End(endpoint.Failure)
		x.reason = ReasonUpstreamUnavailable
		panic(http.ErrAbortHandler)
	}
	ep.EndStatus(resp.StatusCode)
	copyTrailers(dst, resp.Trailer)
}

func perTry(p *RetryPolicy) time.Duration {
	if p == nil {
		return 0
	}
	return p.PerTryTimeout
}

// requestID returns the client's X-Request-Id when it is a sane token, or a
// new random one.
func requestID(h http.Header) string {
	if v := h["X-Request-Id"]; len(v) == 1 && validRequestID(v[0]) {
		return v[0]
	}
	const hex = "0123456789abcdef"
	var b [16]byte
	n := rand.Uint64()
	for i := range b {
		b[i] = hex[n&0xf]
		n >>= 4
	}
	return string(b[:])
}

// validRequestID accepts 1..128 bytes of visible ASCII without spaces, so a
// client's id is safe to log and to pass on.
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// headerSize counts the request line and headers as they were on the wire
// (HTTP/1 framing; HTTP/2 requests are counted the same way).
func headerSize(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for k, vv := range r.Header {
		for _, v := range vv {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

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

func copyTrailers(dst, trailer http.Header) {
	for k, vv := range trailer {
		dst[k] = vv
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
)

type copyError struct {
	side copySide
	err  error
}

// copyBufSize is the chunk in which bodies are streamed.
const copyBufSize = 32 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copyBody streams src to w, flushing after each chunk when flush is set.
// It returns the bytes written and, on failure, which side failed.
func copyBody(w http.ResponseWriter, src io.Reader, flush bool) (int64, *copyError) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var n int64
	var flusher http.Flusher
	if flush {
		flusher, _ = w.(http.Flusher)
	}
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			nw, werr := w.Write(buf[:nr])
			n += int64(nw)
			if werr != nil {
				return n, &copyError{side: sideClient, err: werr}
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, &copyError{side: sideUpstream, err: rerr}
		}
	}
}
