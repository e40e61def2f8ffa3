package proxy

// Tracing on the request path (internal/tracing). With tracing off
// (exchange.tracer nil) nothing here runs: a nil check in ServeHTTP and
// one in each attempt. With it on, an unsampled request gets no span
// (x.span stays nil), only its trace id; a sampled one a server span,
// ended by finish, and a client span per attempt, ended by the attempt.

import (
	"net/http"

	"github.com/levee-gw/levee/internal/tracing"
)

// beginTrace decides whether r is traced and starts its server span.
func beginTrace(x *exchange, r *http.Request) {
	rq := x.tracer.Begin(r.Header)
	x.traceID, x.span = rq.TraceID, rq.Span
	if rq.Span != nil {
		x.traceCtx = rq.Ctx
	}
}

// endTrace records how the request ended on its server span and ends it.
func endTrace(x *exchange, r *http.Request, appID string) {
	tracing.EndServer(x.span, tracing.ServerEnd{
		Route: x.route.Name, Method: r.Method, Path: r.URL.Path, Reason: string(x.reason), App: appID,
		Upstream: x.route.Upstream.Name, Status: x.status, Attempts: x.attempts,
		BytesIn: x.body.bytesRead(), BytesOut: x.bytesOut,
	})
	x.span = nil
}

// beginAttemptSpan starts attempt n's span at ep (a sampled request only)
// and puts its traceparent in the headers the attempt sends.
func beginAttemptSpan(a *attempt, x *exchange, r *http.Request, n int) {
	a.span = x.tracer.BeginAttempt(x.traceCtx, r.Header, a.ep.Address, n)
}

// endAttemptSpan records the attempt's result and retry decision.
func (a *attempt) endAttemptSpan() {
	tracing.EndAttempt(a.span, tracing.AttemptEnd{Status: a.res.status, Failure: string(a.res.fail), Retried: a.retried})
	a.span = nil
}

// SwapTracer makes t (nil: tracing off) the tracer of every request that
// starts from now on and returns the previous one; requests in flight end
// their spans on the one they started with.
func (h *Handler) SwapTracer(t *tracing.Tracer) *tracing.Tracer { return h.tracer.Swap(t) }

// Tracer returns the tracer serving now (nil: off).
func (h *Handler) Tracer() *tracing.Tracer { return h.tracer.Load() }
