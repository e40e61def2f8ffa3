package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/levee-gw/levee/internal/idempotency"
)

// AttemptHeader is set on every attempt to its number: "1" on the first,
// "2" on the first retry, and so on. levee sheds higher attempts first.
const AttemptHeader = "Levee-Attempt"

// drainLimit is how much of a discarded response body is read so that its
// connection can be reused; a longer body is closed unread (its connection
// is then dropped rather than read to the end).
const drainLimit = 4 << 10

// ErrThrottled is returned, wrapped, by RoundTrip when adaptive throttling
// refused a request's first attempt locally: the service has been refusing
// (429, 503, network errors) most of what this Transport sent it lately, so
// the request was not sent at all. Try later, or elsewhere; check with
// errors.Is.
var ErrThrottled = errors.New("client: request refused locally: the service has been refusing requests")

// Transport is an http.RoundTripper that retries with backoff, a retry budget
// and adaptive throttling; see the package documentation. Create it with
// New; the zero Transport is not usable. It is safe for concurrent use and
// starts no goroutine.
type Transport struct {
	s settings

	stats struct {
		requests, attempts, retries                   atomic.Uint64
		budgetExhausted, throttled, retryAfterTooLong atomic.Uint64
	}

	mu struct {
		sync.Mutex
		budget budget
		window window
	}
}

// New returns a Transport configured by o, or an error listing every invalid
// field of o.
func New(o Options) (*Transport, error) {
	s, err := o.validate()
	if err != nil {
		return nil, err
	}
	t := &Transport{s: s}
	t.mu.budget = newBudget(s.maxTokens, s.tokenRatio)
	if s.throttleOn {
		t.mu.window = newWindow(s.bucketWidth, s.buckets, s.clock.Now())
	}
	return t, nil
}

// Stats are a Transport's counters since New, and its current budget and
// throttle state.
type Stats struct {
	// Requests counts calls to RoundTrip.
	Requests uint64
	// Attempts counts attempts handed to the base RoundTripper.
	Attempts uint64
	// Retries counts attempts after the first handed to the base.
	Retries uint64
	// BudgetExhausted counts retries not made because the budget had
	// MaxTokens/2 tokens or fewer.
	BudgetExhausted uint64
	// Throttled counts attempts refused locally by adaptive throttling:
	// first attempts (which returned ErrThrottled) and retries (not made).
	Throttled uint64
	// RetryAfterTooLong counts retries not made because the wait
	// (Retry-After or backoff) exceeded MaxRetryAfter or the request's
	// deadline.
	RetryAfterTooLong uint64

	// Tokens is the retry budget's current content (0 when disabled).
	Tokens float64
	// WindowRequests and WindowAccepts are the throttle's counts over its
	// window now, and ThrottleProbability the probability with which the
	// next attempt would be refused (all 0 when disabled).
	WindowRequests, WindowAccepts uint64
	ThrottleProbability           float64
}

// Stats returns the Transport's counters and current state. It is cheap and
// safe to call concurrently with RoundTrip.
func (t *Transport) Stats() Stats {
	st := Stats{
		Requests:          t.stats.requests.Load(),
		Attempts:          t.stats.attempts.Load(),
		Retries:           t.stats.retries.Load(),
		BudgetExhausted:   t.stats.budgetExhausted.Load(),
		Throttled:         t.stats.throttled.Load(),
		RetryAfterTooLong: t.stats.retryAfterTooLong.Load(),
	}
	now := t.s.clock.Now()
	t.mu.Lock()
	if t.s.budgetOn {
		st.Tokens = float64(t.mu.budget.tokens) / 1000
	}
	if t.s.throttleOn {
		t.mu.window.advance(now)
		st.WindowRequests, st.WindowAccepts = t.mu.window.requests, t.mu.window.accepts
	}
	t.mu.Unlock()
	if t.s.throttleOn {
		st.ThrottleProbability = throttleProbability(st.WindowRequests, st.WindowAccepts, t.s.k)
	}
	return st
}

// CloseIdleConnections closes the base RoundTripper's idle connections, if
// it has such a method; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.s.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// outcome is how one attempt ended, for the budget and the throttle.
type outcome int

const (
	outcomeSuccess   outcome = iota // a status below 500 not in RetryOn
	outcomeRetryable                // a network error or a status in RetryOn
	outcomeNeutral                  // anything else: a 5xx not in RetryOn, a non-network error
	outcomeCancelled                // the request's context ended
)

// RoundTrip sends req, retrying as the package documentation describes, and
// returns the last response or error. It blocks during backoff, returning
// early with the context's error when req's context ends. It does not modify
// req, and closes req.Body as the http.RoundTripper contract requires.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.stats.requests.Add(1)
	ctx := req.Context()

	if p, ok := t.admit(); !ok {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w (refusal probability %.3f)", ErrThrottled, p)
	}

	replayable := isIdempotent(req) && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil)
	body := req.Body
	for attempt := 1; ; attempt++ {
		out := req.Clone(ctx)
		out.Body = body
		out.Header.Set(AttemptHeader, strconv.Itoa(attempt))
		t.stats.attempts.Add(1)
		if attempt > 1 {
			t.stats.retries.Add(1)
		}
		resp, err := t.s.base.RoundTrip(out)

		oc, refused := t.classify(ctx, resp, err)
		now := t.s.clock.Now()
		t.record(now, oc, refused)
		if oc != outcomeRetryable || !replayable || attempt >= t.s.maxAttempts {
			return resp, err
		}

		delay, ok := t.delay(ctx, now, attempt-1, resp)
		if !ok {
			t.stats.retryAfterTooLong.Add(1)
			return resp, err
		}
		if !t.budgetAllows() {
			t.stats.budgetExhausted.Add(1)
			return resp, err
		}
		var next io.ReadCloser
		if body != nil && body != http.NoBody {
			b, gerr := req.GetBody()
			if gerr != nil {
				return resp, err // cannot replay: the last answer stands
			}
			next = b
		}
		if _, ok := t.admit(); !ok {
			if next != nil {
				next.Close()
			}
			return resp, err
		}

		discard(resp)
		if serr := t.s.clock.Sleep(ctx, delay); serr != nil {
			if next != nil {
				next.Close()
			}
			return nil, serr
		}
		if body != nil && body != http.NoBody {
			body = next
		}
	}
}

// isIdempotent reports whether req may be sent more than once, by levee's
// one rule (internal/idempotency: an idempotent method, or a non-empty
// Idempotency-Key); the empty method is GET, as net/http sends it.
func isIdempotent(req *http.Request) bool {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	return idempotency.Request(method, req.Header)
}

// classify sorts one attempt's result, and says whether the backend refused
// it (for the throttle: a network error, 429 or 503).
func (t *Transport) classify(ctx context.Context, resp *http.Response, err error) (oc outcome, refused bool) {
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return outcomeCancelled, false
		case isNetworkError(err):
			return outcomeRetryable, true
		default:
			return outcomeNeutral, false
		}
	}
	refused = resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
	switch {
	case t.s.retryOn.has(resp.StatusCode):
		return outcomeRetryable, refused
	case resp.StatusCode < 500:
		return outcomeSuccess, refused
	default:
		return outcomeNeutral, refused
	}
}

// isNetworkError reports whether err is a failure of the connection or a
// timeout of the attempt, as opposed to a request the transport could never
// send (bad URL, unsupported scheme), which a retry cannot fix.
func isNetworkError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}

// record feeds one attempt's outcome to the budget and the throttle window.
// A sent attempt is counted as a request when its outcome is known, not when
// it leaves, so that attempts in flight (many, when a client starts with a
// burst) do not count as refused. An attempt cancelled by its caller is
// counted nowhere.
func (t *Transport) record(now time.Time, oc outcome, refused bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.s.budgetOn {
		switch oc {
		case outcomeSuccess:
			t.mu.budget.success()
		case outcomeRetryable:
			t.mu.budget.failure()
		}
	}
	if t.s.throttleOn && oc != outcomeCancelled {
		t.mu.window.add(now, refused)
	}
}

func (t *Transport) budgetAllows() bool {
	if !t.s.budgetOn {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.budget.allowsRetry()
}

// admit decides whether an attempt may be sent, returning the refusal
// probability it used. An attempt it lets through is counted by record when
// its outcome is known. An attempt it refuses is not counted at all: the
// SRE book counts local refusals as requests, but then the refusals keep
// the ratio high after the service recovers, and full traffic resumes only
// after about (Window/2)·ln(rate·Window) (measured: 7 to 19 minutes with a
// 2-minute window). Counting only the attempts that reached the service, a
// recovered service is seen as healthy once the outage's failures leave the
// window, within one Window.
func (t *Transport) admit() (float64, bool) {
	if !t.s.throttleOn {
		return 0, true
	}
	now, r := t.s.clock.Now(), t.random()
	t.mu.Lock()
	t.mu.window.advance(now)
	p := throttleProbability(t.mu.window.requests, t.mu.window.accepts, t.s.k)
	refuse := r < p
	t.mu.Unlock()
	if refuse {
		t.stats.throttled.Add(1)
		return p, false
	}
	return p, true
}

// random returns the injected random number, clamped into [0, 1).
func (t *Transport) random() float64 {
	r := t.s.rand()
	switch {
	case !(r >= 0): // negative or NaN
		return 0
	case r >= 1:
		return math.Nextafter(1, 0)
	}
	return r
}

// delay returns the wait before retry n (0 for the first retry): full-jitter
// backoff, or the response's Retry-After if longer. It returns false when the
// wait exceeds MaxRetryAfter or would reach the context's deadline.
func (t *Transport) delay(ctx context.Context, now time.Time, n int, resp *http.Response) (time.Duration, bool) {
	d := t.backoff(n)
	if resp != nil {
		if v := resp.Header.Get("Retry-After"); v != "" {
			if ra, ok := ParseRetryAfter(v, now); ok {
				if ra > t.s.maxRetryAfter {
					return 0, false
				}
				d = max(d, ra)
			}
		}
	}
	if deadline, ok := ctx.Deadline(); ok && !now.Add(d).Before(deadline) {
		return 0, false
	}
	return d, true
}

// backoff draws the wait before retry n uniformly from
// [0, min(Max, Base·2^n)).
func (t *Transport) backoff(n int) time.Duration {
	c := backoffCap(t.s.backoffBase, t.s.backoffMax, n)
	d := time.Duration(t.random() * float64(c))
	if d >= c { // float rounding near 1
		d = max(0, c-1)
	}
	return d
}

// backoffCap is min(maxD, base·2^n), computed without overflow in at most
// 63 steps.
func backoffCap(base, maxD time.Duration, n int) time.Duration {
	c := base
	for i := 0; i < n && c < maxD; i++ {
		if c > maxD/2 {
			return maxD
		}
		c *= 2
	}
	return min(c, maxD)
}

// discard reads at most drainLimit bytes of resp's body, so its connection
// can be reused, and closes it.
func discard(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	resp.Body.Close()
}
