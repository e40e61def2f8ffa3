package proxy

// The access log's line for one request (telemetry.AccessLog formats and
// writes it on its own goroutine). With the log off (exchange.log
// nil) nothing here runs and the request path allocates nothing for it;
// with it on, the attempt times come from a pool, so a line costs no
// allocation on the fast path.

import (
	"net/http"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/certset"
	"github.com/levee-gw/levee/internal/telemetry"
	"github.com/levee-gw/levee/internal/upstream"
)

// timings recycles the exchanges' upstream.Timing: it must be on the heap
// (forwarders are called through an interface), and a pool keeps that
// from costing an allocation per request.
var timings = sync.Pool{New: func() any { return new(upstream.Timing) }}

func getTiming() *upstream.Timing { return timings.Get().(*upstream.Timing) }

// logAccess queues x's line and gives x.timing back to the pool (no
// forwarder holds it once the handler is done: they fill it before
// Forward returns).
func logAccess(x *exchange, r *http.Request, d time.Duration, appID string) {
	traceID := x.traceID
	if v := r.Header["Traceparent"]; traceID == "" && len(v) == 1 {
		traceID = telemetry.TraceIDOf(v[0]) // several traceparent headers: invalid, ignored
	}
	ua := ""
	if v := r.Header["User-Agent"]; len(v) > 0 {
		ua = v[0]
	}
	e := telemetry.AccessEntry{
		Time: x.start, RequestID: x.reqID, TraceID: traceID, Client: x.client, Method: r.Method,
		Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, Proto: r.Proto, UserAgent: ua, Status: x.status,
		Route: x.route.Name, Upstream: x.route.Upstream.Name, Endpoint: x.endpoint,
		Reason: string(x.reason), UpstreamStatus: x.upstreamStatus, BytesIn: x.body.bytesRead(),
		BytesOut: x.bytesOut, Duration: d, Attempts: x.attempts, App: appID,
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		// Only a client that sent a certificate pays for its strings.
		if c, ok := certset.ClientOf(r.TLS); ok {
			e.TLSClientSubject, e.TLSClientSHA256 = c.Subject, c.SHA256
		}
	}
	if tm := x.timing; tm != nil {
		e.Connect, e.FirstByte = tm.Connect, tm.FirstByte
		x.timing = nil
		timings.Put(tm)
	}
	x.log.Log(&e)
}

// SwapAccessLog makes a (nil: none) the access log of every request that
// starts from now on and returns the previous one. Requests in flight log
// to the one they started with (telemetry.AccessLog.Retire forwards their
// lines once it is retired).
func (h *Handler) SwapAccessLog(a *telemetry.AccessLog) *telemetry.AccessLog {
	return h.accessLog.Swap(a)
}

// AccessLog returns the access log serving now (nil: off).
func (h *Handler) AccessLog() *telemetry.AccessLog { return h.accessLog.Load() }
