package proxy

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/levee-gw/levee/client"
	"github.com/levee-gw/levee/internal/idempotency"
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
	// OnRefusedStream: an HTTP/2 upstream refused the stream. levee speaks
	// HTTP/1.1 to upstreams today, so this never fires yet.
	OnRefusedStream bool
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
	if errors.As(err, &op) && op.Op == "dial" {
		return failConnect
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return failTimeout
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
}

func (b *untouchedBody) Read(p []byte) (int, error) {
	b.read = true
	return b.rc.Read(p)
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
