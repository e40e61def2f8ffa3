package ratelimit

import (
	"net/http"
	"strconv"
	"sync"
	"time"
	"unsafe"
)

// Decision is the answer for one request, with what the IETF RateLimit
// header fields (draft-ietf-httpapi-ratelimit-headers) and Retry-After
// need. The zero Decision is a refusal with nothing to report.
type Decision struct {
	// Allowed reports whether the request may proceed.
	Allowed bool
	// Limit is the policy's size: the burst b of a Rate, the n of a Quota.
	Limit int64
	// Remaining is how many more requests would be admitted at the same
	// instant, after this one: for a Rate ⌊(L − (TAT − now))/T⌋ with the TAT
	// after the decision, for a Quota n − count. 0 on a refusal.
	Remaining int64
	// Reset is how long until Remaining is back to Limit if no request
	// comes: TAT − now for a Rate, the end of the current window − now for
	// a Quota. 0 for a Rate key at rest.
	Reset time.Duration
	// RetryAfter is, on a refusal, exactly how long until one request would
	// be admitted: next − L − now for a Rate (next = max(TAT, now) + T), the
	// end of the window − now for a Quota. 0 when Allowed.
	RetryAfter time.Duration
	// Quota is true when the decision is a Quota's, false when it is a
	// Rate's: a refusal with Quota set means the quota is exhausted
	// (quota_exhausted), without it that the rate limit was hit
	// (rate_limited).
	Quota bool
}

// Header names written by AppendHeaders, spelled as in the draft. Header
// names are case-insensitive: SetHeaders stores them under Go's canonical
// keys (http.CanonicalHeaderKey: "Ratelimit-Limit", ...), which is how
// net/http writes them.
const (
	HeaderLimit      = "RateLimit-Limit"
	HeaderRemaining  = "RateLimit-Remaining"
	HeaderReset      = "RateLimit-Reset"
	HeaderRetryAfter = "Retry-After"
)

// ResetSeconds is Reset in whole seconds, rounded up (a client told 0
// seconds before the limiter is full would retry too early).
func (d Decision) ResetSeconds() int64 { return ceilSeconds(d.Reset) }

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up and at least
// 1, the value of the Retry-After header on a refusal.
func (d Decision) RetryAfterSeconds() int64 { return max(1, ceilSeconds(d.RetryAfter)) }

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// SetHeaders sets RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset
// on h and, on a refusal, Retry-After (removing a Retry-After otherwise).
// It does not allocate for values below smallValues (1024): their header
// slices are shared, read-only, with capacity 1, so Header.Add still copies
// them; callers must not assign into h[name][0] for these names.
func (d Decision) SetHeaders(h http.Header) {
	h[keyLimit] = headerValue(d.Limit)
	h[keyRemaining] = headerValue(d.Remaining)
	h[keyReset] = headerValue(d.ResetSeconds())
	if d.Allowed {
		delete(h, HeaderRetryAfter)
		return
	}
	h[HeaderRetryAfter] = headerValue(d.RetryAfterSeconds())
}

// The http.Header keys of the RateLimit fields (canonical form).
const (
	keyLimit     = "Ratelimit-Limit"
	keyRemaining = "Ratelimit-Remaining"
	keyReset     = "Ratelimit-Reset"
)

// AppendHeaders appends the same fields as SetHeaders in HTTP/1.1 wire form
// ("Name: value\r\n" each) to dst, for writers that build a response head
// themselves. It allocates only if dst must grow.
func (d Decision) AppendHeaders(dst []byte) []byte {
	dst = appendField(dst, HeaderLimit, d.Limit)
	dst = appendField(dst, HeaderRemaining, d.Remaining)
	dst = appendField(dst, HeaderReset, d.ResetSeconds())
	if !d.Allowed {
		dst = appendField(dst, HeaderRetryAfter, d.RetryAfterSeconds())
	}
	return dst
}

func appendField(dst []byte, name string, v int64) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = strconv.AppendInt(dst, v, 10)
	return append(dst, "\r\n"...)
}

// smallValues is how many non-negative integers have a shared header value.
const smallValues = 1024

// smallHeaderValues holds "0".."1023", each as a one-element slice of one
// backing array, built on first use (24 KiB), never at import.
var smallHeaderValues = sync.OnceValue(func() []string {
	s := make([]string, smallValues)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
})

func headerValue(v int64) []string {
	if v >= 0 && v < smallValues {
		s := smallHeaderValues()
		return s[v : v+1 : v+1]
	}
	// A larger value: its digits and the one-element slice in one
	// allocation; the bytes are written once, before the string over them
	// is made, and never again.
	d := &bigValue{}
	b := strconv.AppendInt(d.b[:0], v, 10)
	d.v[0] = unsafe.String(&d.b[0], len(b))
	return d.v[:]
}

// bigValue holds a header value outside smallHeaderValues (an int64 has
// at most 20 bytes in decimal).
type bigValue struct {
	b [20]byte
	v [1]string
}
