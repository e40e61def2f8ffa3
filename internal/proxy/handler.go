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
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/levee-gw/levee/internal/grpcwire"
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
	// TrustedProxies, when set, are the peers whose X-Forwarded-For (or
	// Forwarded) names the client (clientaddr.go); nil: the peer is the
	// client and its forwarding headers are replaced upstream.
	TrustedProxies *TrustedProxies
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
	// memory is the request path's share of Options.Memory (memory.go).
	memory budget
	// underscores: Options.UnderscoresInHeaders
	underscores UnderscoreMode
	// trusted: Options.TrustedProxies (nil: none)
	trusted *TrustedProxies
	tracer  atomic.Pointer[tracing.Tracer]

	upgrades  upgradeSet
	consumers *consumerState
	// preflights caps each client address's CORS preflights (cors.go).
	preflights *ratelimit.Limiter[netip.Addr]
	// out answers the upstream's side of each request (copy.go); each
	// request's forwarding holds it, so that an attempt answers without
	// coming back to the Handler.
	out responder
	// mirrors are the copies to shadow upstreams in flight (mirror.go).
	mirrors *mirrorSet
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
	pf, err := ratelimit.New[netip.Addr](ratelimit.Options{Capacity: preflightKeys})
	if err != nil {
		return nil, err
	}
	h := &Handler{metrics: o.Metrics, logger: logger, maxHeader: o.MaxHeaderBytes, memory: budget{o.Memory}, consumers: cs,
		underscores: o.UnderscoresInHeaders, preflights: pf, mirrors: newMirrorSet()}
	if tp := o.TrustedProxies; tp != nil && len(tp.Prefixes) > 0 {
		h.trusted = &TrustedProxies{Prefixes: append([]netip.Prefix(nil), tp.Prefixes...), Forwarded: tp.Forwarded}
	}
	h.upgrades.conns = make(map[io.Closer]struct{})
	h.out = responder{memory: h.memory, upgrades: &h.upgrades, logger: logger, drainClosed: o.Metrics.drainClosed}
	h.table.Store(t)
	h.accessLog.Store(o.AccessLog)
	h.tracer.Store(o.Tracer)
	return h, nil
}

// Swap makes t the table for every request that starts from now on.
// Requests in flight finish on the table they started with.
// The table it replaces drains: its long connections get t's drain
// timeout (drain.go).
func (h *Handler) Swap(t *Table) {
	if old := h.table.Swap(t); old != nil && old != t && old.drain != nil {
		old.drain.retire(t.drainTimeout)
	}
}

// Table returns the table currently serving.
func (h *Handler) Table() *Table { return h.table.Load() }

// ServeHTTP serves one request: the admission steps in a fixed order
// (admit.go), each of which passes the request on or answers it, then the
// attempts (attempt.go). finish, deferred, accounts for the request and
// gives back what the steps took, however it ended.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := exchange{start: time.Now(), log: h.accessLog.Load(), tracer: h.tracer.Load(), grpc: grpcwire.IsGRPCRequest(r.Header)}
	h.metrics.inflight.Inc()
	defer h.finish(&x, r)
	idv := requestIDValue(r.Header)
	x.reqID = idv[0]
	x.client, x.forwardedFor = clientAddress(r, h.trusted)
	w.Header()["X-Request-Id"] = idv
	if x.tracer != nil {
		beginTrace(&x, r)
	}
	t := h.table.Load()
	x.route, x.table = t.noRoute, t
	rt, sentPath, ok := h.admitFraming(w, r, &x, t) // 1. headers, route, method, declared length
	if !ok {
		return
	}
	if rt.Access != nil && !admitAddress(w, &x, rt) { // 1a. the client address (access.go), before any credential or body byte
		return
	}
	x.prio = requestPriority(rt, r)               // once: every later step reads x.prio
	prepareBody(w, r, &x, rt)                     // 2. body limit and timeout, screens
	if !h.admitConsumer(w, r, &x, rt, sentPath) { // 3. identity, grant, limits, app slot
		return
	}
	if rt.Direct != nil { // 3a. a redirect or fixed answer (direct.go), from the path as sent
		serveDirect(w, r, &x, rt)
		return
	}
	if rt.Rewrite != nil && !h.rewriteRequest(w, r, &x, t, rt.Rewrite) { // 3b. the forwarded path and Host
		return
	}
	if rt.Headers != nil && rt.Headers.Request != nil { // 3c. the route's header changes (headers.go)
		rt.Headers.Request.apply(r.Header, r, &x)
	}
	if rt.Split != nil { // 3d. a split's side (split.go): from here on, a plain route to its upstream
		rt = rt.Split.pick(r)
		x.route = rt
	}
	if rt.Upstream.GRPCWeb && isGRPCWeb(r) { // 3e. gRPC-Web to gRPC (grpcweb.go)
		h.serveGRPCWeb(w, r, &x, rt)
		return
	}
	h.serveUpstream(w, r, &x, rt)
}

// serveUpstream runs the steps from memory admission to the attempts.
func (h *Handler) serveUpstream(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route) {
	if !h.admitMemory(w, r, x, rt) { // 4. memory pressure, small body read whole
		return
	}
	if !admitUpstream(w, r, x, rt.Upstream) { // 5. the upstream's admission slot
		return
	}
	bal := rt.Upstream.Balance()
	ep, ok := h.pickFirst(w, r, x, rt.Upstream, bal) // 6. the first endpoint
	if !ok {
		return
	}
	if rt.Mirror != nil { // 6a. a copy to the shadow upstream, never waited for (mirror.go)
		h.mirror(r, x, rt.Mirror)
	}
	f := forwarding{out: &h.out, metrics: h.metrics}
	f.forward(w, r, x, rt, bal, ep)
}

// finish ends the request, however it ended: it gives back what the
// admission steps took (the admission slot, the app's concurrency slot,
// the memory reserved) and records the request's metrics, span and access
// log line.
func (h *Handler) finish(x *exchange, r *http.Request) {
	x.releaseAdmission()
	if x.appSlot {
		x.app.counters.inflight.Add(-1)
	}
	x.body.end()
	if x.usage != nil {
		x.usage.release() // a cluster's unused row and byte grants (usage.go)
	}
	h.memory.release(x)
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

// requestID returns the client's X-Request-Id when it is a sane token, or a
// new random one.
func requestID(h http.Header) string { return requestIDValue(h)[0] }

// newID is a new request id and the one-element header value that holds
// it, in one allocation (requestIDValue).
type newID struct {
	b [16]byte
	v [1]string
}

// requestIDValue is requestID as a one-element header value (capacity 1,
// so an append copies): the client's own id in a new slice, or a new
// random id whose string and slice share one allocation. The id's bytes
// are written once, before the string over them is made, and never again.
func requestIDValue(h http.Header) []string {
	if v := h["X-Request-Id"]; len(v) == 1 && validRequestID(v[0]) {
		return []string{v[0]}
	}
	const hex = "0123456789abcdef"
	id := &newID{}
	n := rand.Uint64()
	for i := range id.b {
		id.b[i] = hex[n&0xf]
		n >>= 4
	}
	id.v[0] = unsafe.String(&id.b[0], len(id.b))
	return id.v[:]
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
