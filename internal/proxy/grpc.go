package proxy

// gRPC requests (Content-Type application/grpc...: grpcwire.IsGRPC) through
// the request path: levee's own refusals are gRPC statuses in a
// trailers-only answer (never a JSON body, which a gRPC client cannot
// read), their grpc-timeout is the request's deadline, and the retry
// decision reads the upstream's grpc-status (retry.go, grpcStatusOf).

import (
	"context"
	"net/http"
	"time"

	"github.com/levee-gw/levee/internal/grpcwire"
)

// grpcAnswer is a reason's refusal to a gRPC request: the status its HTTP
// status maps to (grpcwire.FromHTTPStatus) and the grpc-message, which
// carries levee's reason as "levee <reason>: <sentence>"; rendered once.
type grpcAnswer struct {
	code     grpcwire.Code
	msg      string
	sentence string
}

// refuseGRPC writes reason's refusal to a gRPC request with detail ("":
// none) and the refusal's Retry-After (retryAfter > 0: that wait; the
// JSON refusal's rules otherwise). It returns the HTTP status written
// (200) and 0 body bytes.
func refuseGRPC(w http.ResponseWriter, reason Reason, detail string, retryAfter time.Duration) (int, int64) {
	rf := refusals[reason]
	if rf == nil {
		grpcwire.WriteTrailersOnly(w, grpcwire.Internal, "levee internal: internal error", string(reasonInternal))
		return http.StatusOK, 0
	}
	if rf.retryAfter {
		if retryAfter > 0 {
			w.Header()["Retry-After"] = retryAfterIn(retryAfter)
		} else if w.Header()["Retry-After"] == nil {
			w.Header()["Retry-After"] = retryAfterValue
		}
	}
	msg := rf.grpc.msg
	if detail != "" { // from a fixed set of codes, or a clipped part of the request (refuseParamN)
		msg = "levee " + string(reason) + " (" + detail + "): " + rf.grpc.sentence
	}
	return grpcwire.WriteTrailersOnly(w, rf.grpc.code, msg, string(reason)), 0
}

// grpcAnswerOf renders the gRPC form of a refusal row.
func grpcAnswerOf(reason Reason, status int, sentence string) grpcAnswer {
	return grpcAnswer{code: grpcwire.FromHTTPStatus(status), msg: "levee " + string(reason) + ": " + sentence, sentence: sentence}
}

// grpcDeadline returns the deadline a gRPC request's grpc-timeout sets,
// counted from start, and whether it carries a valid one. A malformed
// value is ignored, as grpc-go's server does not (it fails the call): a
// proxy that cannot read a hint passes the request on with the route's
// own timeout, and the upstream judges the header itself.
func grpcDeadline(r *http.Request, start time.Time) (time.Time, bool) {
	v := r.Header["Grpc-Timeout"]
	if len(v) == 0 {
		return time.Time{}, false
	}
	d, err := grpcwire.ParseTimeout(v[0])
	if err != nil {
		return time.Time{}, false
	}
	if d > 100*365*24*time.Hour { // no deadline in practice; keeps start.Add in range
		return time.Time{}, false
	}
	return start.Add(d), true
}

// retryGRPC reports whether attempt n, answered with res, is sent again
// for its gRPC status under pol: the status is in the answer's headers (a
// trailers-only answer: nothing of it reached the client), pol names it,
// attempts remain, and the request's body can be sent again (it was kept
// whole; see grpcBody). Unlike an HTTP status, a gRPC status does not need an idempotent method (every gRPC
// call is a POST): naming the status is the operator's word that a call
// answered with it may go again, as in gRPC's own retry policy
// (retryableStatusCodes). The wait, the deadline and the budget are the
// caller's, as for any retry.
func retryGRPC(pol *RetryPolicy, n int, res result, held *untouchedBody) bool {
	if pol == nil || n >= pol.Attempts || !res.hasGRPC || res.fail != "" || res.grpc > 31 || pol.OnGRPC&(1<<res.grpc) == 0 {
		return false
	}
	return held == nil || held.resendable()
}

// resendable reports whether b can be sent again after an answer: it was
// kept whole (it ended within keep). Not "nothing of it was read": the
// transport may still be about to read it (an endpoint may answer before
// it took the body), and read is the transport's to write; eof is set
// once, after the last write to kept.
func (b *untouchedBody) resendable() bool {
	return b.keep > 0 && b.eof.Load()
}

// keptBody is the body to send on the next attempts: what b kept (b must
// be resendable), never nil so the forwarding replays it.
func (b *untouchedBody) keptBody() []byte {
	if b.kept == nil {
		return []byte{}
	}
	return b.kept
}

// grpcBody is the body of a gRPC request under a retry policy: streamed
// as it arrives (a bidi call's messages cannot wait for its end), and,
// when the policy retries gRPC statuses and the memory budget has room
// for ReplayBodyLimit bytes (held until the request ends), kept as it
// goes so that a call answered with a retryable status can be sent again.
func (b budget) grpcBody(r *http.Request, x *exchange, pol *RetryPolicy) *untouchedBody {
	held := &untouchedBody{rc: r.Body}
	if pol.OnGRPC != 0 && pol.ReplayBodyLimit > 0 && b.reserve(x, pol.ReplayBodyLimit) {
		held.keep, held.ended = pol.ReplayBodyLimit, make(chan struct{})
	}
	return held
}

// grpcBodyGrace bounds how long an attempt answered with a retryable gRPC
// status waits for the rest of the request's body (grpcBodyEnd).
const grpcBodyGrace = 250 * time.Millisecond

// grpcBodyEnd waits, when res is a gRPC status pol retries and held is
// being kept but has not ended, for the client's body to end (a server
// answers a unary call once it has its message, often before the client's
// END_STREAM reached levee), at most grpcBodyGrace, the request's deadline
// or the client's leaving. The transport's writer, still reading the
// body, sees its end and sets eof; nothing else reads it meanwhile. A
// streaming client that waits for an answer before sending more costs
// the grace, then gets the upstream's status.
func grpcBodyEnd(ctx context.Context, pol *RetryPolicy, res result, held *untouchedBody, deadline time.Time) {
	if pol == nil || held == nil || held.ended == nil || !res.hasGRPC || res.grpc > 31 || pol.OnGRPC&(1<<res.grpc) == 0 || held.eof.Load() {
		return
	}
	wait := grpcBodyGrace
	if !deadline.IsZero() {
		wait = min(wait, time.Until(deadline))
	}
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-held.ended:
	case <-t.C:
	case <-ctx.Done():
	}
}
