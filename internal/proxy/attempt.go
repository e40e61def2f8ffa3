package proxy

// One attempt, begun and ended once.
//
// An attempt is one try of a request at one endpoint. It is begun when the
// endpoint is picked (the endpoint counts it in flight, the per-try timer
// starts) and ended exactly once, by a defer in try, however the try ends
// (an answer streamed, a refusal, a retry, the client gone, a panic that
// aborts a truncated answer). Between the two, settle types its result
// once: the endpoint's status, or the failure class, or that the client
// ended it. Everything that learns how an attempt went reads that result:
//   - settle (the response head or the failure is in): the upstream's
//     latency histogram and the balancer's Observer, told the time to
//     headers as soon as it is known (a long stream does not delay it);
//   - end: the endpoint's stats (EndStatus for an answer, End with the
//     outcome otherwise), the per-try timer and the attempt's context,
//     and the exchange's outcome, which the admission release reads when
//     the request is over: the last attempt's outcome is the request's.
//
// A request that makes no attempt (no endpoint, a body refused before
// any was sent) reports NotSent to admission: levee's own answers, its
// no_available_endpoint 503 among them, are not upstream congestion.
//
// forward is the loop (Caddy's proxyLoopIteration and tryAgain; the end is
// grpc-go's balancer.PickResult.Done); whether an attempt goes again is
// retry.go's decision (retryAttempt), whole, over the result. The attempt
// calls only down: its answers are the exchange's (exchange.go) and the
// responder's (copy.go), never the Handler's.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/grpcwire"
	"github.com/levee-gw/levee/internal/tracing"
	"github.com/levee-gw/levee/internal/upstream"
)

// result is how an attempt ended, typed once by settle.
type result struct {
	// status is the endpoint's answer; 0 when none arrived.
	status int
	// fail is the transport failure; empty when the endpoint answered or
	// the client ended the attempt.
	fail failure
	// client: the client ended the attempt (it left, or its body broke or
	// was too large). Says nothing about the endpoint.
	client bool
	// broken: the endpoint's answer could not be used (cut off mid-body,
	// or a protocol switch the request did not ask for).
	broken bool
	// refusal: the forwarder answered the request itself (a data source:
	// see upstream.Refusal); written as levee's refusal, never retried.
	refusal *upstream.Refusal
	// tls is the detail of a failed TLS handshake (upstream.TLSFailure),
	// a connect failure: answered 502 upstream_tls when not retried.
	tls string
	// grpc is the grpc-status in the answer's headers (a trailers-only
	// gRPC answer), read only when the retry policy names gRPC statuses;
	// hasGRPC says it was there.
	grpc    grpcwire.Code
	hasGRPC bool
}

// reached reports whether any of the request reached the endpoint: all
// but a connect failure (and an attempt the client ended first, which is
// not the endpoint's to count).
func (r result) reached() bool { return !r.client && r.fail != failConnect }

// outcome is the result in the one outcome vocabulary (endpoint.Outcome),
// as the endpoint's stats and the admission limit take it: Abandoned when
// the client ended the attempt, Failure when the endpoint failed, broke its
// answer or answered 503 (a congestion signal), Success otherwise.
func (r result) outcome() endpoint.Outcome {
	switch {
	case r.client:
		return endpoint.Abandoned
	case r.refusal != nil && !r.refusal.Failure:
		return endpoint.NotSent
	case r.fail != "" || r.broken || r.refusal != nil || r.status == http.StatusServiceUnavailable:
		return endpoint.Failure
	}
	return endpoint.Success
}

// forwarding is one request's state across its attempts.
type forwarding struct {
	// out answers the client (the Handler's, lent), metrics counts the
	// retries.
	out      *responder
	metrics  *Metrics
	up       *Upstream
	fw       upstream.Forwarder // the route's own, else the upstream's Transport
	bal      *Balance           // the upstream's endpoints and picker, loaded once
	pol      *RetryPolicy       // nil: no retries
	deadline time.Time          // the route's; zero: none
	// With retries, a small body is buffered so it can be sent again
	// (replay); a larger one streams and is only resent if no byte of it
	// was read (held).
	replay []byte
	held   *untouchedBody
	cb     *clientBody
	tried  triedSet         // endpoints that failed in this request
	timing *upstream.Timing // the exchange's; nil with the access log off
}

// body returns the body and length attempt sends.
func (f *forwarding) body(r *http.Request) (io.ReadCloser, int64) {
	switch {
	case f.replay != nil:
		return replayBody(f.replay), int64(len(f.replay))
	case f.held != nil:
		return f.held, r.ContentLength
	}
	return r.Body, r.ContentLength
}

// replayBody is a buffered body sent again.
func replayBody(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// refusalOf returns err as a forwarder's own answer (*upstream.Refusal),
// nil when it is not one. Called only for an attempt that failed: its
// errors.As target is on the heap, which the fast path must not pay.
func refusalOf(err error) *upstream.Refusal {
	var ref *upstream.Refusal
	if errors.As(err, &ref) {
		return ref
	}
	return nil
}

// isTooLarge reports whether err is the route's body limit (the client's
// body was longer than max_body_bytes).
func isTooLarge(err error) bool {
	var tooLarge *http.MaxBytesError
	return errors.As(err, &tooLarge)
}

// attempt is one try at one endpoint (see the file's header).
type attempt struct {
	ep      *endpoint.Endpoint
	start   time.Time
	ctx     context.Context
	stop    func() bool // disarms the per-try timer; false if it fired
	release func()      // frees ctx
	res     result
	// cause is, for a client result, the error of the client's body (nil:
	// the client left).
	cause    error
	reported bool
	ended    bool
	// span is the attempt's span (a sampled request only; tracing.go),
	// retried whether the request was sent again after it.
	span    tracing.Span
	retried bool
}

// begin starts attempt n at ep.
func (f *forwarding) begin(r *http.Request, x *exchange, ep *endpoint.Endpoint, n int) attempt {
	x.endpoint, x.attempts, x.upstreamStatus = ep.Address, n, 0
	if f.timing != nil {
		*f.timing = upstream.Timing{} // a forwarder that measures nothing leaves zeros
	}
	a := attempt{ep: ep, start: time.Now()}
	a.ctx, a.stop, a.release = attemptContext(r.Context(), perTry(f.pol), f.deadline, a.start)
	ep.Begin()
	return a
}

// send forwards r through the upstream's forwarder within the attempt.
func (a *attempt) send(f *forwarding, r *http.Request, x *exchange) (*http.Response, error) {
	body, length := f.body(r)
	if x.grpcTimeout { // the time left, not the client's whole timeout (grpc.go)
		r.Header["Grpc-Timeout"] = []string{string(grpcwire.AppendTimeout(nil, time.Until(f.deadline)))}
	}
	o := upstream.Outbound{Addr: a.ep.Address, RequestID: x.reqID, ForwardedFor: x.forwardedFor, Body: body, Length: length, Trailer: outboundTrailer(r),
		Timing: f.timing, Caller: x.caller}
	if x.usage != nil {
		o.Usage = x.usage
	}
	return f.fw.Forward(a.ctx, r, o)
}

// settle types the attempt's result from what the forwarder returned and
// tells the latency histogram and the balancer's observer the time to
// headers. It returns the response, nil when the per-try timer fired just
// as the head came in (the attempt's context is cancelled, so its body
// cannot be read: a timeout).
func (a *attempt) settle(f *forwarding, r *http.Request, resp *http.Response, err error) *http.Response {
	if err == nil && !a.stop() {
		resp.Body.Close()
		resp, err = nil, errPerTryTimeout
	}
	rtt := time.Since(a.start)
	f.up.duration.Observe(rtt.Seconds())
	switch {
	case err == nil:
		a.res.status = resp.StatusCode
		if f.pol != nil && f.pol.OnGRPC != 0 {
			a.res.grpc, a.res.hasGRPC = grpcwire.StatusOf(resp.Header)
		}
	case f.cb.failure() != nil: // the client's body broke the attempt
		a.res.client, a.cause = true, f.cb.failure()
	case r.Context().Err() != nil: // the client left
		a.res.client = true
	case isTooLarge(err):
		a.res.client, a.cause = true, err
	default:
		if a.res.refusal = refusalOf(err); a.res.refusal != nil {
			break
		}
		a.res.fail = classifyFailure(a.ctx, err)
		if errors.Is(err, errPerTryTimeout) {
			a.res.fail = failTimeout
		}
		if a.res.fail == failConnect {
			a.res.tls = upstream.TLSFailure(err)
		}
		noteRefused(a.ep, err, a.start)
	}
	if f.bal.Observer != nil && a.res.reached() {
		// A connect failure's short time says nothing of latency (and
		// would make a dead endpoint look the fastest).
		f.bal.Observer.Observe(a.ep, rtt, a.start.Add(rtt))
	}
	return resp
}

// report tells the endpoint how the attempt went, once: its answer's
// status (EndStatus feeds the failure runs), or the outcome when it did
// not answer or broke its answer. respond reports a protocol switch at
// once (a tunnel is not a request in flight); end reports the rest.
func (a *attempt) report() {
	if a.reported {
		return
	}
	a.reported = true
	if a.res.status != 0 && !a.res.broken {
		a.ep.EndStatus(a.res.status)
	} else {
		a.ep.End(a.res.outcome())
	}
}

// end ends the attempt, once (deferred by try; respond ends it earlier
// when the whole answer is in hand): the endpoint's stats, the per-try
// timer and context, and the exchange's outcome.
func (a *attempt) end(x *exchange) {
	if a.ended {
		return
	}
	a.ended = true
	a.report()
	a.release()
	x.outcome = a.res.outcome()
	if a.span != nil {
		a.endAttemptSpan()
	}
}

// forward sends r to ep and, when the route's retry policy allows, to
// other endpoints after failures, then streams the answer to w: a loop over
// attempts, each of which either answers the client or asks for a retry
// after a wait. Bounded by the policy's attempts (the loop ends when try
// says no more).
func (f *forwarding) forward(w http.ResponseWriter, r *http.Request, x *exchange, rt *Route, bal *Balance, ep *endpoint.Endpoint) {
	f.up, f.fw, f.bal, f.pol = rt.Upstream, rt.Upstream.Transport, bal, rt.Retry
	if rt.Forwarder != nil {
		f.fw = rt.Forwarder
	}
	if f.up.Budget != nil {
		f.up.Budget.Request(x.start)
	}
	if rt.Timeout > 0 {
		f.deadline = x.start.Add(rt.Timeout)
	}
	if x.grpc {
		if dl, ok := grpcDeadline(r, x.start); ok {
			x.grpcTimeout = true
			if f.deadline.IsZero() || dl.Before(f.deadline) {
				f.deadline = dl
			}
		}
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
	} else if f.pol != nil && x.grpc && r.ContentLength < 0 {
		f.held = f.out.memory.grpcBody(r, x, f.pol) // streamed, and kept as it goes (grpc.go)
	} else if f.pol != nil {
		replay, replayable, err := f.out.memory.replayableBody(r, x, f.pol.ReplayBodyLimit)
		if err != nil {
			x.clientBodyFailed(w, err)
			return
		}
		f.replay = replay
		if !replayable {
			f.held = &untouchedBody{rc: r.Body}
		}
	}
	for n := 1; ; n++ {
		wait, again := f.try(w, r, x, ep, n)
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
			x.refuse(w, ReasonNoAvailableEndpoint)
			return
		}
		ep = next
	}
}

// try makes attempt n of r at ep and answers the client, unless the
// attempt is to be retried: then it returns the wait before the retry.
// The attempt ends when try returns.
func (f *forwarding) try(w http.ResponseWriter, r *http.Request, x *exchange, ep *endpoint.Endpoint, n int) (wait time.Duration, again bool) {
	a := f.begin(r, x, ep, n)
	if x.span != nil {
		beginAttemptSpan(&a, x, r, n)
	}
	defer a.end(x)
	resp, err := a.send(f, r, x)
	resp = a.settle(f, r, resp, err)
	x.upstreamStatus = a.res.status
	if a.res.client {
		if a.cause == nil {
			x.status = statusClientClosed
		} else {
			x.clientBodyFailed(w, a.cause)
		}
		return 0, false
	}
	if ref := a.res.refusal; ref != nil {
		x.refuseFor(w, ref)
		return 0, false
	}
	if a.res.hasGRPC {
		grpcBodyEnd(r.Context(), f.pol, a.res, f.held, f.deadline) // grpc.go
	}
	v := retryAttempt(f.pol, n, r, a.res, f.held, resp, f.deadline, f.up.Budget, time.Now())
	if v.retry {
		if resp != nil {
			discard(resp)
		}
		if a.res.hasGRPC && a.res.fail == "" {
			f.metrics.retries.WithLabelValues(f.up.Name, "grpc_"+a.res.grpc.Name()).Inc()
			if f.held != nil { // sent again from what was kept (resendable)
				f.replay, f.held = f.held.keptBody(), nil
			}
		} else {
			f.metrics.retried(f.up.Name, a.res.fail, a.res.status)
		}
		a.retried = true
		return v.wait, true
	}
	if v.budgetExhausted {
		f.metrics.budgetExhausted.WithLabelValues(f.up.Name).Inc()
	}
	switch a.res.fail {
	case "":
		f.out.respond(w, r, x, &a, resp)
	case failTimeout:
		x.refuse(w, ReasonUpstreamTimeout)
	case failConnect:
		if a.res.tls != "" {
			x.refuseDetail(w, ReasonUpstreamTLS, a.res.tls)
			break
		}
		x.refuse(w, ReasonUpstreamUnavailable)
	default:
		x.refuse(w, ReasonUpstreamUnavailable)
	}
	return 0, false
}
