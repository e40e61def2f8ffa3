package proxy

// The exchange and levee's own answers.
//
// exchange is one request's state from ServeHTTP to finish. Every answer
// levee writes itself for a request (a refusal of an admission step, an
// attempt's upstream failure, a client body that broke) is written by one
// of the exchange's methods here, through the refusal table (refusal.go),
// and recorded on the exchange for its metrics, access log line and span.
// The admission steps (admit.go), the attempt (attempt.go) and the
// responder (copy.go) all call them: none of them needs the Handler to
// answer.

import (
	"context"
	"github.com/levee-gw/levee/internal/ratelimit"
	"net/http"
	"time"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/telemetry"
	"github.com/levee-gw/levee/internal/tracing"
	"github.com/levee-gw/levee/internal/upstream"
)

// exchange is what one request accumulates for its metrics and access log.
type exchange struct {
	start time.Time
	// subject is the per-subject limiter key of a JWT's end user and
	// subjectPolicy its limit ("": none; subjectlimit.go).
	subject       string
	subjectPolicy ratelimit.Policy
	route         *Route
	table         *Table // the table the request started on (drain.go)
	endpoint      string
	status        int
	reason        Reason
	bytesOut      int64
	reqID         string
	// client is the request's client address and forwardedFor the
	// X-Forwarded-For to send ("": the peer alone), computed once
	// (clientaddr.go).
	client       string
	forwardedFor string
	attempts     int
	app          *App
	caller       upstream.Caller // the verified identity, with app set (consumers.go)
	usage        *usageMeter     // the app's row and byte quotas (usage.go); nil: none
	sentPath     string          // the path as sent, when normalising changed it
	prio         admission.Priority
	reserved     int64 // bytes of the memory budget held (memory.go)
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
	// when the request ends (finish).
	rel      admission.Release
	admitted bool
	// appSlot: the request holds one of x.app's MaxConcurrency slots,
	// given back by finish.
	appSlot bool
	// grpc: a gRPC request (grpcwire.IsGRPC): levee's answers are gRPC
	// statuses (grpc.go); grpcTimeout: it carried a valid grpc-timeout,
	// which set the forwarding's deadline.
	grpc, grpcTimeout bool
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

// admissionOutcome is how the request ended for its admission release:
// the last attempt's outcome; Abandoned when the client went away (499,
// or nothing was answered); NotSent when no attempt was made, whatever
// levee answered itself.
func admissionOutcome(x *exchange) endpoint.Outcome {
	switch {
	case x.status == statusClientClosed || x.status == 0:
		return endpoint.Abandoned
	case x.attempts == 0:
		return endpoint.NotSent
	}
	return x.outcome
}

// statusClientClosed is recorded (never sent) when the client went away
// before the answer was ready, following NGINX's convention.
const statusClientClosed = 499

// refuse answers levee's refusal for reason.
func (x *exchange) refuse(w http.ResponseWriter, reason Reason) {
	x.reason = reason
	if x.grpc {
		x.status, x.bytesOut = refuseGRPC(w, reason, "", 0)
	} else {
		x.status, x.bytesOut = refuseN(w, reason)
	}
	x.route.metrics.refused(reason)
}

// refuseDetail answers the refusal for reason with its detail.
func (x *exchange) refuseDetail(w http.ResponseWriter, reason Reason, detail string) {
	x.reason = reason
	if x.grpc {
		x.status, x.bytesOut = refuseGRPC(w, reason, detail, 0)
	} else {
		x.status, x.bytesOut = refuseDetailN(w, reason, detail)
	}
	x.route.metrics.refused(reason)
}

// refuseFor writes a forwarder's own refusal (upstream.Refusal).
func (x *exchange) refuseFor(w http.ResponseWriter, ref *upstream.Refusal) {
	x.reason = Reason(ref.Reason)
	if StatusOf(x.reason) == 0 {
		x.reason = reasonInternal // a forwarder's reason without a table row: a bug, answered 500
	}
	if x.grpc {
		x.status, x.bytesOut = refuseGRPC(w, x.reason, ref.Detail, ref.RetryAfter)
	} else {
		x.status, x.bytesOut = refuseParamN(w, x.reason, ref.Param, ref.Detail, ref.RetryAfter)
	}
	x.route.metrics.refused(x.reason)
}

// shed refuses work that admission control turned away (counted in
// levee_shed_total as well as levee_refusals_total), with a jittered
// Retry-After when retryAfter > 0.
func (x *exchange) shed(w http.ResponseWriter, reason Reason, retryAfter time.Duration) {
	x.reason = reason
	if x.grpc {
		x.status, x.bytesOut = refuseGRPC(w, reason, "", retryAfter)
	} else {
		x.status, x.bytesOut = refuseRetryAfterN(w, reason, retryAfter)
	}
	x.route.metrics.refused(reason)
	x.route.metrics.shed(reason)
}
