package client

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"
)

// Defaults applied by New to the zero fields of Options.
const (
	DefaultMaxAttempts   = 3
	DefaultBackoffBase   = 100 * time.Millisecond
	DefaultBackoffMax    = 2 * time.Second
	DefaultMaxTokens     = 10
	DefaultTokenRatio    = 0.1
	DefaultThrottleK     = 2
	DefaultWindow        = 10 * time.Second
	DefaultMaxRetryAfter = 30 * time.Second
)

// Limits enforced by New.
const (
	// MaxAttemptsLimit is the largest Options.MaxAttempts New accepts.
	MaxAttemptsLimit = 10
	// MaxTokensLimit is the largest Budget.MaxTokens New accepts (gRPC's limit).
	MaxTokensLimit = 1000
	// maxBuckets bounds the throttle window's ring.
	maxBuckets = 120
)

// defaultRetryOn is the set of statuses retried when Options.RetryOn is nil;
// unexported so that no caller can change it for everyone.
var defaultRetryOn = []int{
	http.StatusTooManyRequests,
	http.StatusBadGateway,
	http.StatusServiceUnavailable,
	http.StatusGatewayTimeout,
}

// Options configures a Transport. The zero value is valid: every zero field
// takes the default its comment names.
type Options struct {
	// Base sends each attempt. Nil means http.DefaultTransport.
	Base http.RoundTripper

	// MaxAttempts is the number of attempts per request, the first included.
	// Zero means 3; 1 disables retries; at most 10.
	MaxAttempts int

	// Backoff sets the wait between attempts.
	Backoff Backoff

	// RetryOn lists the response statuses (400 to 599) that are retried.
	// Nil means 429, 502, 503 and 504; an empty non-nil slice
	// retries network errors only.
	RetryOn []int

	// Budget bounds retries to a fraction of successes.
	Budget Budget

	// Throttle refuses attempts locally while the service keeps refusing.
	Throttle Throttle

	// MaxRetryAfter is the longest Retry-After the Transport waits for. A
	// retryable response asking for longer is returned as it is, without a
	// retry. Zero means 30s; negative is an error.
	MaxRetryAfter time.Duration

	// Clock reads the time and waits. Nil means the real clock. Tests inject
	// a fake; see Clock.
	Clock Clock

	// Rand returns a number in [0, 1) and draws backoff jitter and throttle
	// decisions. Nil means math/rand/v2's Float64. It is called from every
	// goroutine using the Transport, so it must be safe for concurrent use
	// (a *rand.Rand is not; wrap it in a mutex). Values outside [0, 1) are
	// clamped into it.
	Rand func() float64
}

// Backoff is the exponential backoff with full jitter between attempts: the
// wait before retry n (n = 0 for the first) is uniform in
// [0, min(Max, Base·2^n)). A Retry-After that asks for longer wins.
type Backoff struct {
	// Base is the upper bound of the first wait. Zero means 100ms.
	Base time.Duration
	// Max caps the upper bound. Zero means 2s, or Base if Base is larger;
	// it must not be below Base.
	Max time.Duration
}

// Budget is the client-side retry budget (gRPC retry throttling): a bucket
// of MaxTokens tokens; each failed attempt takes 1, each successful one adds
// TokenRatio; retries are allowed only while tokens > MaxTokens/2.
//
// A failed attempt is a network error or a status in RetryOn; a successful
// one is any other status below 500. Other outcomes (a 500 not in RetryOn,
// a cancelled request) leave the bucket as it is.
type Budget struct {
	// MaxTokens is the bucket's size, and its content at start. Zero means
	// 10; at most 1000; kept to three decimal places.
	MaxTokens float64
	// TokenRatio is what each success adds back. Zero means 0.1; it is
	// rounded to three decimal places and must stay above zero.
	TokenRatio float64
	// Disabled turns the budget off: retries are then limited only by
	// MaxAttempts, Retry-After and the throttle. Meant for tests and
	// comparisons; the zero value (enabled) is what callers want.
	Disabled bool
}

// Throttle is the SRE book's adaptive client-side throttling: before each
// attempt, refuse locally with probability
// max(0, (requests − K·accepts) / (requests + 1)) over the last Window.
type Throttle struct {
	// K is how many requests per accept the client may send before it
	// starts refusing locally. Zero means 2; it must be at least 1 (below 1
	// a healthy service would be throttled). Larger is more permissive.
	K float64
	// Window is how long requests and accepts are remembered. Zero means
	// 10 seconds; at least 1s. It is kept in at most 120 buckets of whole
	// seconds, so it is rounded up to a whole number of buckets.
	//
	// The window also sets how fast the throttle reopens: only attempts
	// that reached the service are counted (not local refusals), so once
	// the service is back its successes outweigh the outage's failures
	// within about one Window. During a total outage at rate r, about
	// sqrt(r·Window) attempts per Window still reach the service, which is
	// how the client learns that it has recovered. The SRE book suggests 2
	// minutes; levee defaults to 10 seconds so that recovery takes seconds,
	// not minutes.
	Window time.Duration
	// Disabled turns adaptive throttling off.
	Disabled bool
}

// settings are Options after defaults and validation, in the units the
// Transport computes with.
type settings struct {
	base          http.RoundTripper
	maxAttempts   int
	backoffBase   time.Duration
	backoffMax    time.Duration
	retryOn       statusSet
	budgetOn      bool
	maxTokens     int64 // thousandths of a token
	tokenRatio    int64 // thousandths of a token
	throttleOn    bool
	k             float64
	bucketWidth   time.Duration
	buckets       int
	maxRetryAfter time.Duration
	clock         Clock
	rand          func() float64
}

// validate applies defaults and checks o, returning every problem found,
// each naming its field.
func (o Options) validate() (settings, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("client: Options.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	s := settings{
		base:          o.Base,
		maxAttempts:   o.MaxAttempts,
		backoffBase:   o.Backoff.Base,
		backoffMax:    o.Backoff.Max,
		budgetOn:      !o.Budget.Disabled,
		throttleOn:    !o.Throttle.Disabled,
		k:             o.Throttle.K,
		maxRetryAfter: o.MaxRetryAfter,
		clock:         o.Clock,
		rand:          o.Rand,
	}
	if s.base == nil {
		s.base = http.DefaultTransport
	}
	if s.clock == nil {
		s.clock = realClock{}
	}
	if s.rand == nil {
		s.rand = rand.Float64
	}

	switch {
	case s.maxAttempts == 0:
		s.maxAttempts = DefaultMaxAttempts
	case s.maxAttempts < 0 || s.maxAttempts > MaxAttemptsLimit:
		bad("MaxAttempts", "must be between 1 and %d (0 means %d), got %d", MaxAttemptsLimit, DefaultMaxAttempts, o.MaxAttempts)
	}

	switch {
	case s.backoffBase == 0:
		s.backoffBase = DefaultBackoffBase
	case s.backoffBase < 0:
		bad("Backoff.Base", "must not be negative, got %v", o.Backoff.Base)
	}
	switch {
	case s.backoffMax == 0:
		s.backoffMax = max(DefaultBackoffMax, s.backoffBase)
	case s.backoffMax < 0:
		bad("Backoff.Max", "must not be negative, got %v", o.Backoff.Max)
	case s.backoffBase > 0 && s.backoffMax < s.backoffBase:
		bad("Backoff.Max", "must not be below Backoff.Base (%v), got %v", s.backoffBase, o.Backoff.Max)
	}

	retryOn := o.RetryOn
	if retryOn == nil {
		retryOn = defaultRetryOn
	}
	for i, code := range retryOn {
		if code < 400 || code > 599 {
			bad(fmt.Sprintf("RetryOn[%d]", i), "must be a status from 400 to 599, got %d", code)
			continue
		}
		s.retryOn.add(code)
	}

	if s.budgetOn {
		mt := o.Budget.MaxTokens
		switch {
		case mt == 0:
			s.maxTokens = DefaultMaxTokens * 1000
		case math.IsNaN(mt) || mt <= 0 || mt > MaxTokensLimit:
			bad("Budget.MaxTokens", "must be above 0 and at most %d (0 means %d), got %v", MaxTokensLimit, DefaultMaxTokens, mt)
		default:
			s.maxTokens = int64(math.Round(mt * 1000))
			if s.maxTokens == 0 {
				bad("Budget.MaxTokens", "must be at least 0.001, got %v", mt)
			}
		}
		tr := o.Budget.TokenRatio
		switch {
		case tr == 0:
			s.tokenRatio = DefaultTokenRatio * 1000
		case math.IsNaN(tr) || tr < 0 || tr > MaxTokensLimit:
			bad("Budget.TokenRatio", "must be above 0 and at most %d (0 means %v), got %v", MaxTokensLimit, DefaultTokenRatio, tr)
		default:
			s.tokenRatio = int64(math.Round(tr * 1000))
			if s.tokenRatio == 0 {
				bad("Budget.TokenRatio", "must be at least 0.001 (it is kept to three decimal places), got %v", tr)
			}
		}
	}

	if s.throttleOn {
		switch {
		case s.k == 0:
			s.k = DefaultThrottleK
		case math.IsNaN(s.k) || math.IsInf(s.k, 0) || s.k < 1:
			bad("Throttle.K", "must be a finite number of at least 1 (0 means %d), got %v", DefaultThrottleK, o.Throttle.K)
		}
		w := o.Throttle.Window
		switch {
		case w == 0:
			w = DefaultWindow
		case w < time.Second:
			bad("Throttle.Window", "must be at least 1s (0 means %v), got %v", DefaultWindow, o.Throttle.Window)
		}
		if w >= time.Second {
			s.bucketWidth, s.buckets = windowBuckets(w)
		}
	}

	switch {
	case s.maxRetryAfter == 0:
		s.maxRetryAfter = DefaultMaxRetryAfter
	case s.maxRetryAfter < 0:
		bad("MaxRetryAfter", "must not be negative, got %v", o.MaxRetryAfter)
	}

	return s, errors.Join(errs...)
}

// windowBuckets splits a window of at least 1s into at most maxBuckets
// buckets of a whole number of seconds, rounding the window up.
func windowBuckets(w time.Duration) (width time.Duration, n int) {
	secs := (w + time.Second - 1) / time.Second
	per := (secs + maxBuckets - 1) / maxBuckets // seconds per bucket, >= 1
	width = per * time.Second
	n = int((secs + per - 1) / per)
	return width, n
}

// statusSet is a set of HTTP statuses from 0 to 639.
type statusSet [10]uint64

func (s *statusSet) add(code int) { s[code/64] |= 1 << (code % 64) }

func (s *statusSet) has(code int) bool {
	return code >= 0 && code < 640 && s[code/64]&(1<<(code%64)) != 0
}
