package proxy

// The retry decision, whole: whether an attempt that ended is sent again,
// and after what wait. retryAttempt is the one entry (attempt.go's try
// calls it once per attempt, with one reading of the clock for all of it):
//
//   - retryable: the failure is one the policy lists, and the request may
//     be sent again (nothing was sent, or it is idempotent by
//     internal/idempotency's rule and its body is whole to resend);
//   - decideRetry: attempts remain, and whether the retry is free of the
//     budget (nothing reached a backend; failover.go);
//   - shouldRetry: the wait (full-jitter backoff drawn from the policy's
//     random source, or the upstream's Retry-After) ends before the
//     route's deadline;
//   - the upstream's retry budget has room, unless the retry is free.
//
// Where a retry goes (an endpoint not yet failed) is failover.go's.

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/client"
	"github.com/levee-gw/levee/internal/idempotency"
	"github.com/levee-gw/levee/internal/retrybudget"
	"github.com/levee-gw/levee/internal/upstream"
)

// RetryPolicy is one route's retry rules, resolved by the gateway from the
// route's or its upstream's `retry` block. Immutable once in a Table.
//
// A failed attempt is retried when every one of these holds:
//   - attempts remain (Attempts counts the first one);
//   - the failure matches a condition the policy lists;
//   - nothing was sent (connect failure), or the method is idempotent
//     (or the request carries an Idempotency-Key) and its body, if any,
//     was buffered (at most ReplayBodyLimit bytes) so it can be sent again;
//   - the wait (full-jitter backoff, or the upstream's Retry-After when it
//     is longer) ends before the route's deadline, and a Retry-After longer
//     than BackoffMax is never undercut: that answer goes to the client as is;
//   - the upstream's retry budget has room (see package retrybudget), or
//     the attempt failed to connect: a request that reached no backend adds
//     no backend load when sent to another one, so it spends no budget
//     (it is still bounded by Attempts; see failover.go).
//
// A retry goes to an endpoint that has not failed in this request, in the
// next zone tier when its own has none left (see pickRetry).
type RetryPolicy struct {
	// Attempts is the total number of tries, first included (>= 1).
	Attempts int
	// OnConnectFailure: the connection could not be made (nothing sent).
	OnConnectFailure bool
	// OnResetBeforeResponse: the connection broke after the request was
	// sent and before a response arrived.
	OnResetBeforeResponse bool
	// OnRefusedStream: an HTTP/2 upstream refused the stream (RST_STREAM
	// REFUSED_STREAM: not processed, RFC 9113 section 8.7), so any method
	// may go again, if its body is intact.
	OnRefusedStream bool
	// OnGRPC is the set of gRPC statuses retried, bit c for code c
	// (grpcwire.Code): judged from the grpc-status of a trailers-only
	// answer (in its headers), never from a streamed answer's trailers, so
	// no byte of the answer has reached the client (grpc.go).
	OnGRPC uint32
	// OnStatus lists the upstream statuses that are retried. A timeout levee
	// hits itself (connect, response header, per try) counts as 504.
	OnStatus []int
	// PerTryTimeout bounds each attempt until its response headers; 0: only
	// the upstream's response-header timeout applies.
	PerTryTimeout time.Duration
	// BackoffBase and BackoffMax shape the wait before retry n (n >= 1):
	// uniform in [0, min(BackoffMax, BackoffBase·2^(n-1))).
	BackoffBase, BackoffMax time.Duration
	// ReplayBodyLimit is the largest request body buffered so that it can be
	// sent again; requests with larger bodies are not retried once sent.
	ReplayBodyLimit int64
	// Rand is the backoff's random source: a uniform value in [0, n) for
	// n > 0, safe for concurrent use. nil means math/rand/v2's Int64N;
	// tests set it to make each wait exact.
	Rand func(n int64) int64
}

// retryVerdict is the retry decision on one attempt.
type retryVerdict struct {
	wait  time.Duration
	retry bool
	// budgetExhausted: every other condition held, but the upstream's
	// retry budget had no room (the caller counts it).
	budgetExhausted bool
}

// retryAttempt decides whether attempt n, which ended with res (resp is
// the endpoint's answer, nil when none), is sent again: shouldRetry's
// conditions, then budget's room unless the retry is free. now is the one
// reading of the clock the whole decision uses. Pure but for the budget's
// state and the policy's random source.
func retryAttempt(pol *RetryPolicy, n int, r *http.Request, res result, held *untouchedBody, resp *http.Response, deadline time.Time,
	budget *retrybudget.Budget, now time.Time) retryVerdict {
	wait, retry, free := shouldRetry(pol, n, r, res, held, resp, deadline, now)
	if !retry {
		return retryVerdict{}
	}
	if !free && budget != nil && !budget.TryRetry(now) {
		return retryVerdict{budgetExhausted: true}
	}
	return retryVerdict{wait: wait, retry: true}
}

// shouldRetry decides whether an attempt n that ended with res is sent
// again under pol: decideRetry's conditions, then a wait (backoff, or the
// upstream's Retry-After; see retryWait) that ends before deadline (zero:
// none). free reports that the retry spends no retry budget (nothing
// reached a backend); the budget itself is the caller's to check. Pure but
// for the backoff's jitter.
func shouldRetry(pol *RetryPolicy, n int, r *http.Request, res result, held *untouchedBody, resp *http.Response, deadline, now time.Time) (wait time.Duration, retry, free bool) {
	if res.client {
		return 0, false, false
	}
	if retry, free = decideRetry(pol, n, r, res.fail, res.status, held); !retry && !retryGRPC(pol, n, res, held) {
		return 0, false, false
	}
	wait, ok := retryWait(pol, resp, n, now)
	if !ok || (!deadline.IsZero() && !now.Add(wait).Before(deadline)) {
		return 0, false, false
	}
	return wait, true, free
}

// decideRetry decides whether attempt n, which ended in fail (or with an
// upstream status), is sent again under pol, and whether that retry is
// free of the retry budget (nothing reached a backend). It does not look
// at the wait, the deadline or the budget, which the caller checks next.
func decideRetry(pol *RetryPolicy, n int, r *http.Request, fail failure, status int, held *untouchedBody) (retry, free bool) {
	if pol == nil || n >= pol.Attempts || !retryable(pol, r, fail, status, held) {
		return false, false
	}
	return true, fail == failConnect
}

// retryable reports whether an attempt that ended in fail (or with an
// upstream status) may be sent again under pol.
func retryable(pol *RetryPolicy, r *http.Request, fail failure, status int, held *untouchedBody) bool {
	switch {
	case fail == failConnect:
		// Nothing was sent: any method may go again, if its body is intact.
		return pol.OnConnectFailure && (held == nil || !held.read)
	case fail == failRefused:
		return pol.OnRefusedStream && (held == nil || !held.read)
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

func (p *RetryPolicy) retriesStatus(code int) bool {
	for _, s := range p.OnStatus {
		if s == code {
			return true
		}
	}
	return false
}

// backoff returns the full-jitter wait before retry n (n >= 1).
func (p *RetryPolicy) backoff(n int) time.Duration {
	ceiling := p.BackoffMax
	if n-1 < 30 {
		if d := p.BackoffBase << (n - 1); d > 0 && d < ceiling {
			ceiling = d
		}
	}
	if ceiling <= 0 {
		return 0
	}
	draw := p.Rand
	if draw == nil {
		draw = rand.Int64N
	}
	return time.Duration(draw(int64(ceiling)))
}

// failure names why an attempt failed, as retry conditions and the
// levee_retries_total reason label see it.
type failure string

const (
	failConnect failure = "connect_failure"
	failReset   failure = "reset_before_response"
	failRefused failure = "refused_stream"
	failTimeout failure = "timeout"
)

// errPerTryTimeout is the cause with which an attempt's context is
// cancelled when its per-try timeout fires.
var errPerTryTimeout = errors.New("per-try timeout")

// classifyFailure names a transport error of one attempt.
func classifyFailure(attemptCtx context.Context, err error) failure {
	if errors.Is(context.Cause(attemptCtx), errPerTryTimeout) {
		return failTimeout
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" || upstream.TLSFailure(err) != "" {
		return failConnect // a failed TLS handshake never reached the application either
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return failTimeout
	}
	if upstream.RefusedStream(err) {
		return failRefused
	}
	return failReset
}

// idempotent reports whether r may be sent twice, by levee's one rule
// (internal/idempotency): its method is idempotent or it carries a
// non-empty idempotency key.
func idempotent(r *http.Request) bool { return idempotency.Request(r.Method, r.Header) }

// untouchedBody lets an attempt that failed before reading anything of the
// request body leave it usable for the next attempt: Close is deferred to
// the handler, and read reports whether any byte was taken.
type untouchedBody struct {
	rc   io.ReadCloser
	read bool
	// keep > 0: a gRPC request's body is also kept as it streams, up to
	// keep bytes (grpc.go); over once it passed keep (kept is then
	// dropped), eof once it ended within keep. eof is stored after kept
	// is complete: a reader that sees it may read kept.
	keep int64
	kept []byte
	over bool
	eof  atomic.Bool
	// ended is closed with eof (keep > 0 only): grpcBodyEnd waits on it.
	ended chan struct{}
}

func (b *untouchedBody) Read(p []byte) (int, error) {
	b.read = true
	n, err := b.rc.Read(p)
	if b.keep > 0 && !b.over && !b.eof.Load() { // nothing is written once eof is set
		switch {
		case int64(len(b.kept)+n) > b.keep:
			b.over, b.kept = true, nil
		case n > 0:
			b.kept = append(b.kept, p[:n]...)
		}
		if err == io.EOF && !b.over {
			b.eof.Store(true)
			if b.ended != nil {
				close(b.ended)
			}
		}
	}
	return n, err
}

func (b *untouchedBody) Close() error { return nil }

// retryWait decides the wait before retrying a response, honouring its
// Retry-After. ok is false when the answer must go to the client as is.
func retryWait(p *RetryPolicy, resp *http.Response, n int, now time.Time) (wait time.Duration, ok bool) {
	wait = p.backoff(n)
	if resp == nil {
		return wait, true
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return wait, true
	}
	after, parsed := client.ParseRetryAfter(v, now)
	if !parsed {
		return wait, true
	}
	if after > p.BackoffMax {
		return 0, false // never sooner than the upstream says, and never that long here
	}
	return max(wait, after), true
}

// drainLimit bounds what is read of a discarded response before closing it.
const drainLimit = 4 << 10

func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	resp.Body.Close()
}

// sleepCtx waits d or until ctx ends; it reports whether the wait ran out.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// attemptContext derives the context of one attempt: cancelled with cause
// errPerTryTimeout when the per-try timeout or the route's deadline passes
// before the response headers arrive. stop disarms the timer once they
// have; release frees the context when the attempt is over. Without a
// timeout the request's own context is used and both are no-ops.
func attemptContext(parent context.Context, perTry time.Duration, deadline time.Time, now time.Time) (ctx context.Context, stop func() bool, release func()) {
	limit := perTry
	if !deadline.IsZero() {
		if left := deadline.Sub(now); limit <= 0 || left < limit {
			limit = max(left, 0)
		}
	}
	if limit <= 0 && deadline.IsZero() {
		return parent, alwaysStopped, noop
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := time.AfterFunc(limit, func() { cancel(errPerTryTimeout) })
	return ctx, t.Stop, func() { t.Stop(); cancel(nil) }
}

func alwaysStopped() bool { return true }
func noop()               {}
