// Package fwdauth asks an authorization service about a request (forward
// auth, `auth: forward`): a GET to the service's URL carrying the
// request's credential headers and X-Forwarded-Method, -Proto, -Host,
// -Uri and -For, never its body. A 2xx answer lets the request through
// with the named answer headers; a 4xx or 3xx answer is the client's
// answer (status, bounded body, the safe headers); no answer in time, a
// refused connection, a 5xx or an answer over MaxBodyBytes is a failure,
// which the route's on_error turns into a refusal or a pass.
//
// The calls of one Checker are bounded by its own admission limit
// (MaxInFlight, refused at once when full, never queued) and timeout, and
// answers may be cached by a digest of the credential headers (cache.go).
package fwdauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// MaxBodyBytes bounds the body of a service's answer passed to a client;
// a longer one is a failure (ResultBadAnswer).
const MaxBodyBytes = 64 << 10

// Result is how one check ended.
type Result uint8

const (
	// ResultAllowed: the service answered 2xx.
	ResultAllowed Result = iota
	// ResultDenied: the service answered 3xx or 4xx, passed to the client.
	ResultDenied
	// ResultTimeout: no whole answer within Timeout.
	ResultTimeout
	// ResultUnreachable: the connection failed (refused, reset, DNS).
	ResultUnreachable
	// ResultBadAnswer: a 5xx, a 1xx, or a body over MaxBodyBytes.
	ResultBadAnswer
	// ResultBusy: MaxInFlight calls were under way; not asked.
	ResultBusy
	resultCount
)

// Results are the metric labels of the results, by Result.
var Results = [resultCount]string{"allowed", "denied", "timeout", "unreachable", "bad_answer", "busy"}

func (r Result) String() string {
	if r < resultCount {
		return Results[r]
	}
	return "unknown"
}

// Failed reports whether r is a failure of the service (on_error applies).
func (r Result) Failed() bool {
	return r == ResultTimeout || r == ResultUnreachable || r == ResultBadAnswer
}

// Options configure a Checker.
type Options struct {
	// URL is the service's http or https URL.
	URL string
	// Timeout bounds each call, the answer's body included (> 0).
	Timeout time.Duration
	// CopyRequestHeaders are the request headers sent to the service, in
	// canonical form; their values are the cache key.
	CopyRequestHeaders []string
	// CopyResponseHeaders are the headers of a 2xx answer added to the
	// request sent upstream (canonical).
	CopyResponseHeaders []string
	// CacheTTL > 0 caches 2xx, 401 and 403 answers that long per
	// credentials digest; at most CacheEntries (default
	// DefaultCacheEntries) are held.
	CacheTTL     time.Duration
	CacheEntries int
	// MaxInFlight bounds the calls at once (> 0).
	MaxInFlight int
	// Client makes the calls; nil: one of this package's (no redirects
	// followed, no cookies). Its own Timeout, if any, applies as well.
	Client *http.Client
	// Now is the clock of the cache; nil: time.Now.
	Now func() time.Time
}

// Decision is a check's outcome.
type Decision struct {
	Result Result
	// Cached: the answer came from the cache, the service was not asked.
	Cached bool
	// Status, Header and Body, with ResultDenied, are the client's answer:
	// the service's status, its headers safe to forward (SafeHeaders) and
	// its body (at most MaxBodyBytes).
	Status int
	Header http.Header
	Body   []byte
	// Upstream, with ResultAllowed, holds the CopyResponseHeaders the
	// service answered with, to set on the request sent upstream.
	Upstream http.Header
	// Err says why, on a failure.
	Err error
}

// SafeHeaders are the headers of a denial passed to the client: those a
// login flow or a client needs, never framing or hop-by-hop ones.
var SafeHeaders = []string{"Content-Type", "Www-Authenticate", "Location", "Set-Cookie", "Cache-Control", "Retry-After", "Vary", "Content-Language"}

// Checker asks one authorization service. Safe for concurrent use.
type Checker struct {
	o      Options
	target *url.URL
	client *http.Client
	slots  chan struct{} // MaxInFlight tokens
	cache  *cache        // nil: no cache

	calls     [resultCount]atomic.Uint64 // by Result, calls made (and busy refusals)
	hits      [resultCount]atomic.Uint64 // cached answers used, by Result
	passedErr atomic.Uint64              // failures let through by on_error: allow (Count)
}

// defaultClient follows no redirect (a 3xx is the client's answer) and
// keeps no cookies.
var defaultClient = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport: &http.Transport{
		Proxy: nil, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
		ResponseHeaderTimeout: time.Minute, // the call's own deadline is shorter
	},
}

// New returns a Checker for o.
func New(o Options) (*Checker, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("fwdauth: url %q: must be an http:// or https:// URL", o.URL)
	}
	if o.Timeout <= 0 || o.MaxInFlight <= 0 {
		return nil, errors.New("fwdauth: Timeout and MaxInFlight must be > 0")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Checker{o: o, target: u, client: o.Client, slots: make(chan struct{}, o.MaxInFlight)}
	if c.client == nil {
		c.client = defaultClient
	}
	if o.CacheTTL > 0 {
		n := o.CacheEntries
		if n <= 0 {
			n = DefaultCacheEntries
		}
		c.cache = newCache(n, o.CacheTTL)
	}
	return c, nil
}

// Request is what the service is told about the client's request.
type Request struct {
	Method, Proto, Host, URI, ClientIP string
	Header                             http.Header // the client's headers; only CopyRequestHeaders are read
}

// Check asks the service about q (or answers from the cache). It never
// waits longer than Timeout, nor for a free slot.
func (c *Checker) Check(ctx context.Context, q Request) Decision {
	var key [32]byte
	if c.cache != nil {
		key = c.digest(q.Header)
		if d, ok := c.cache.get(key, c.o.Now()); ok {
			c.hits[d.Result].Add(1)
			d.Cached = true
			return d
		}
	}
	select {
	case c.slots <- struct{}{}:
	default:
		c.calls[ResultBusy].Add(1)
		return Decision{Result: ResultBusy, Err: errors.New("fwdauth: max_in_flight calls under way")}
	}
	d := c.call(ctx, q)
	<-c.slots
	c.calls[d.Result].Add(1)
	if c.cache != nil && (d.Result == ResultAllowed || (d.Result == ResultDenied && (d.Status == http.StatusUnauthorized || d.Status == http.StatusForbidden))) {
		c.cache.put(key, d, c.o.Now())
	}
	return d
}

// PassedOnError counts a failure let through by on_error: allow.
func (c *Checker) PassedOnError() { c.passedErr.Add(1) }

func (c *Checker) call(ctx context.Context, q Request) Decision {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.target.String(), nil)
	if err != nil {
		return Decision{Result: ResultBadAnswer, Err: err}
	}
	for _, k := range c.o.CopyRequestHeaders {
		if v := q.Header[k]; len(v) > 0 {
			req.Header[k] = v
		}
	}
	set := func(k, v string) {
		if v != "" {
			req.Header[k] = []string{v}
		}
	}
	set("X-Forwarded-Method", q.Method)
	set("X-Forwarded-Proto", q.Proto)
	set("X-Forwarded-Host", q.Host)
	set("X-Forwarded-Uri", q.URI)
	set("X-Forwarded-For", q.ClientIP)
	resp, err := c.client.Do(req)
	if err != nil {
		return failure(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return failure(ctx, err)
	}
	if len(body) > MaxBodyBytes {
		return Decision{Result: ResultBadAnswer, Err: fmt.Errorf("fwdauth: answer body over %d bytes", MaxBodyBytes)}
	}
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		var up http.Header
		for _, k := range c.o.CopyResponseHeaders {
			if v := resp.Header[k]; len(v) > 0 {
				if up == nil {
					up = make(http.Header, len(c.o.CopyResponseHeaders))
				}
				up[k] = v
			}
		}
		return Decision{Result: ResultAllowed, Status: s, Upstream: up}
	case s >= 300 && s < 500:
		h := make(http.Header, len(SafeHeaders))
		for _, k := range SafeHeaders {
			if v := resp.Header[k]; len(v) > 0 {
				h[k] = v
			}
		}
		return Decision{Result: ResultDenied, Status: s, Header: h, Body: body}
	default:
		return Decision{Result: ResultBadAnswer, Status: s, Err: fmt.Errorf("fwdauth: service answered %d", s)}
	}
}

// failure classifies a failed call.
func failure(ctx context.Context, err error) Decision {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return Decision{Result: ResultTimeout, Err: err}
	}
	return Decision{Result: ResultUnreachable, Err: err}
}

// digest is the cache key: the SHA-256 of the copied request headers'
// names and values (a header absent and one present but empty differ).
func (c *Checker) digest(h http.Header) [32]byte {
	d := sha256.New()
	for _, k := range c.o.CopyRequestHeaders {
		v, ok := h[k]
		if !ok {
			d.Write([]byte{0})
			continue
		}
		d.Write([]byte{1})
		for _, s := range v {
			d.Write([]byte(s))
			d.Write([]byte{0})
		}
		d.Write([]byte{1})
	}
	var out [32]byte
	d.Sum(out[:0])
	return out
}

// Stats are a Checker's counts.
type Stats struct {
	Calls, CacheHits [resultCount]uint64
	PassedOnError    uint64
}

// Stats returns the Checker's counts.
func (c *Checker) Stats() Stats {
	var s Stats
	for i := range c.calls {
		s.Calls[i], s.CacheHits[i] = c.calls[i].Load(), c.hits[i].Load()
	}
	s.PassedOnError = c.passedErr.Load()
	return s
}
