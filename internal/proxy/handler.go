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
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"

	"github.com/levee-gw/levee/internal/upstream"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/auth"
	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/memguard"
	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/telemetry"
	"github.com/levee-gw/levee/internal/tracing"
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
	// Tracer, when set, traces requests (internal/tracing); nil: off,
	// at no cost.
	Tracer *tracing.Tracer
	// Shared, when set, decides consumer limits and signature replays for
	// a cluster of nodes (SharedLimits); nil: in this process only.
	Shared SharedLimits
}

// Handler is the data plane's http.Handler. Safe for concurrent use.
type Handler struct {
	table   atomic.Pointer[Table]
	metrics *Metrics
	// accessLog and tracer are swapped on reload (SwapAccessLog,
	// SwapTracer) like the table: a request loads each once, into its
	// exchange, and uses that one to its end. nil: off.
	accessLog atomic.Pointer[telemetry.AccessLog]
	logger    *slog.Logger
	maxHeader int
	memory    *memguard.Guard
	// underscores: Options.UnderscoresInHeaders
	underscores UnderscoreMode
	tracer      atomic.Pointer[tracing.Tracer]

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
	cs.shared = o.Shared
	h := &Handler{metrics: o.Metrics, logger: logger, maxHeader: o.MaxHeaderBytes, memory: o.Memory, consumers: cs,
		underscores: o.UnderscoresInHeaders}
	h.upgrades.conns = make(map[io.Closer]struct{})
	h.table.Store(t)
	h.accessLog.Store(o.AccessLog)
	h.tracer.Store(o.Tracer)
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
	// outcome is the last attempt's (see admissionOutcome).
	outcome endpoint.Outcome
	// For the access log: the last attempt's endpoint status (0: none
	// answered), the client's body (nil: none; it counts the bytes read),
	// the trace id (set by tracing; "" makes finish read traceparent), and
	// the last attempt's times, nil with the log off (accesslog.go).
	upstreamStatus int
	body           *clientBody
	traceID        string
	timing         *upstream.Timing
	// span is the server span of a sampled request (nil: not traced) and
	// traceCtx carries it, the attempts' spans' parent (tracing.go).
	span     tracing.Span
	traceCtx context.Context
	// log and tracer are the Handler's, loaded once when the request
	// starts (a reload may swap the Handler's meanwhile); nil: off.
	log    *telemetry.AccessLog
	tracer *tracing.Tracer
	// buffered is the request body read whole before admission (nil:
	// none, or it streams); see bufferBody.
	buffered []byte
	// rel is the admission slot while admitted is set: released once,
	// by releaseAdmission, early when the answer is complete (respond) or
	// when the request ends.
	rel      admission.Release
	admitted bool
}

// ServeHTTP serves one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := exchange{start: time.Now(), log: h.accessLog.Load(), tracer: h.tracer.Load()}
	h.metrics.inflight.Inc()
	defer h.finish(&x, r)

	x.reqID = requestID(r.Header)
	w.Header()["X-Request-Id"] = []string{x.reqID}
	if x.tracer != nil {
		beginTrace(&x, r)
	}

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
	x.body = watchClientBody(w, r, rt.BodyTimeout) // nil without a body
	screenUpgrade(r.Header, rt.Upgrades)
	screenTrailers(r, rt.ForwardTrailers)
	delete(r.Header, AppHeader) // only levee names the app to an upstream
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
	if x.body != nil && r.Body == x.body && r.ContentLength > 0 && r.ContentLength <= rt.BufferBodyBytes {
		// Before admission: a body that stalls holds its connection and
		// its memory, never a slot or an upstream request.
		if !h.bufferBody(w, r, &x) {
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
		x.rel, x.admitted = rel, true
		defer x.releaseAdmission()
	}
	bal := up.Balance()
	ep, err := pick(bal, r)
	if err != nil {
		if !errors.Is(err, balance.ErrNoEndpoint) {
			h.logger.Error("picker failed", "upstream", up.Name, "error", err)
		}
		h.refuse(w, &x, ReasonNoAvailableEndpoint)
		return
	}
	h.forward(w, r, &x, rt, bal, ep)
}

// releaseAdmission gives back x's admission slot, once, with how the
// request went (admissionOutcome): when the request ends, or earlier when
// the upstream's whole answer is in hand (respond).
func (x *exchange) releaseAdmission() {
	if x.admitted {
		x.admitted = false
		x.rel.Done(admissionOutcome(x))
	}
}

func (h *Handler) finish(x *exchange, r *http.Request) {
	x.body.end()
	h.releaseMemory(x)
	h.metrics.inflight.Dec()
	d := time.Since(x.start)
	rm := x.route.metrics
	rm.count(x.status)
	rm.bytes(x.body.bytesRead(), x.bytesOut)
	appID := ""
	if x.app != nil {
		appID = x.app.ID
		x.app.counters.byClass[classOf(x.status)].Add(1)
		if x.status == http.StatusTooManyRequests {
			x.app.counters.byClass[throttledSlot].Add(1)
		}
	}
	rm.duration.Observe(d.Seconds())
	if x.span != nil {
		endTrace(x, r, appID)
	}
	if x.log != nil {
		logAccess(x, r, d, appID)
	}
}

// shed refuses work that admission control turned away (counted in
// levee_shed_total as well as levee_refusals_total), with a jittered
// Retry-After when retryAfter > 0.
func (h *Handler) shed(w http.ResponseWriter, x *exchange, reason Reason, retryAfter time.Duration) {
	x.reason = reason
	x.status, x.bytesOut = refuseRetryAfterN(w, reason, retryAfter)
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
	var sig *[32]byte // a verified signature's MAC, for a shared replay check
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
			x.status, x.bytesOut = refuseDetailN(w, reason, detail)
			x.route.metrics.refused(reason)
			return false
		}
		x.app = app
		if h.consumers.shared != nil && rt.Auth == AuthHMAC {
			sig = signatureMAC(r.Header)
		}
		delete(r.Header, "X-Api-Key")
		delete(r.Header, "Authorization")
		r.Header[AppHeader] = app.header
	}
	var d ratelimit.Decision
	var limited bool
	if h.consumers.shared != nil {
		var replayed bool
		if d, limited, replayed = h.limitShared(r, rt, x.app, sig, now); replayed {
			w.Header()["Www-Authenticate"] = challenge(rt.Auth)
			x.reason = ReasonUnauthenticated
			x.status = RefuseDetail(w, ReasonUnauthenticated, string(auth.ReasonReplayed))
			x.route.metrics.refused(ReasonUnauthenticated)
			return false
		}
	} else {
		d, limited = h.limit(r, rt, x.app, now)
	}
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
		x.status, x.bytesOut = refuseN(w, reason)
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

func (h *Handler) refuse(w http.ResponseWriter, x *exchange, reason Reason) {
	x.reason = reason
	x.status, x.bytesOut = refuseN(w, reason)
	x.route.metrics.refused(reason)
}

// refuseFor writes a forwarder's own refusal (upstream.Refusal).
func (h *Handler) refuseFor(w http.ResponseWriter, x *exchange, ref *upstream.Refusal) {
	x.reason = Reason(ref.Reason)
	if StatusOf(x.reason) == 0 {
		x.reason = reasonInternal // a forwarder's reason without a table row: a bug, answered 500
	}
	x.status, x.bytesOut = refuseParamN(w, x.reason, ref.Param, ref.Detail, ref.RetryAfter)
	x.route.metrics.refused(x.reason)
}

// statusClientClosed is recorded (never sent) when the client went away
// before the answer was ready, following NGINX's convention.
const statusClientClosed = 499

// forward sends r to ep and, when the route's retry policy allows, to
// other endpoints after failures, then streams the answer to w: a loop over
// attempts (attempt.go), each of which either answers the client or asks
// for a retry after a wait.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route, bal *Balance, ep *endpoint.Endpoint) {
	f := forwarding{up: rt.Upstream, fw: rt.Upstream.Transport, bal: bal, pol: rt.Retry}
	if rt.Forwarder != nil {
		f.fw = rt.Forwarder
	}
	if f.up.Budget != nil {
		f.up.Budget.Request(x.start)
	}
	if rt.Timeout > 0 {
		f.deadline = x.start.Add(rt.Timeout)
	}
	if f.pol != nil && f.pol.Attempts < 2 {
		f.pol = nil
	}
	f.cb = x.body
	if x.log != nil {
		x.timing = getTiming()
	}
	f.timing = x.timing
	if x.buffered != nil {
		f.replay = x.buffered // read before admission (bufferBody)
	} else if f.pol != nil {
		replay, replayable, err := h.replayableBody(r, x, f.pol.ReplayBodyLimit)
		if err != nil {
			h.clientBodyFailed(w, x, r, err)
			return
		}
		f.replay = replay
		if !replayable {
			f.held = &untouchedBody{rc: r.Body}
		}
	}
	for n := 1; ; n++ {
		wait, again := h.try(w, r, x, &f, ep, n)
		if !again {
			return
		}
		if !sleepCtx(r.Context(), wait) {
			x.status = statusClientClosed
			return
		}
		f.tried.add(ep)
		next, err := pickRetry(f.bal, &f.tried, time.Now())
		if err != nil {
			h.refuse(w, x, ReasonNoAvailableEndpoint)
			return
		}
		ep = next
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
