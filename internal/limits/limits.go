// Package limits holds the bounds of consumer apps and their limits, each
// defined once, for everything that checks them: internal/config when
// `levee validate` or `levee run` reads the file, internal/apps when the
// admin API or the store changes an app, and internal/ratelimit when the
// gateway turns an app's limits into policies for the request path.
//
// Before this package each of them kept its own copy, and they drifted:
// `rate: 0.0000001` passed the file's check and the store's, but
// ratelimit refused it, so `levee run` dropped the app and its calls got
// 401. Every check here returns a problem sentence ("" when the value is
// fine) that the caller prefixes with the field path, and every caller
// uses the same check, so what one refuses the others refuse too
// (TestValidateAgreesWithRun in internal/gateway feeds the same edge
// values to both).
//
// It is a leaf: pure, no I/O, no levee imports.
package limits

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// The bounds.
const (
	// MaxRate is the fastest sustained rate, in requests per second. The
	// emission interval 1/rate is kept in whole nanoseconds, so a faster
	// rate would round to 0.
	MaxRate = 1e9
	// MaxInterval is the longest emission interval: the slowest rate is
	// one request per MaxInterval (about 11.6 days, 1e-6 requests per
	// second). Slower limits are quotas.
	MaxInterval = 1e6 * time.Second
	// MaxBurst caps a burst, in requests.
	MaxBurst = 1_000_000_000
	// MaxBurstWindow caps burst × interval, the time a spent burst takes
	// to refill (about 31.7 years). The rate limiter keeps now + that
	// window in an int64 of Unix nanoseconds, which this keeps from
	// overflowing before the year 2200: without it rate 0.000001 with
	// burst 1000000000 overflowed and refused everything.
	MaxBurstWindow = 1e9 * time.Second
	// MaxQuotaRequests caps a quota's request count.
	MaxQuotaRequests = 1_000_000_000_000
	// MaxQuotaRows caps a quota's row count (rows of data answers).
	MaxQuotaRows = 1_000_000_000_000_000
	// MaxQuotaBytes caps a quota's byte count (bytes of answers: 1 PiB).
	MaxQuotaBytes = 1 << 50
	// MinQuotaPer and MaxQuotaPer bound a quota's period.
	MinQuotaPer = time.Second
	MaxQuotaPer = 366 * 24 * time.Hour
	// MaxConcurrency caps an app's requests in flight (max_concurrency).
	MaxConcurrency = 100000
	// MaxApps caps the apps (in the file; in the store, file and API
	// together).
	MaxApps = 10000
	// MaxKeys caps an app's keys: the hashes in the file, the active
	// keys in the store.
	MaxKeys = 16
	// MaxGrants caps the routes one app may be granted (and so its
	// route_limits).
	MaxGrants = 256
	// MaxAppNameLen caps an app's display name, in bytes.
	MaxAppNameLen = 128
	// MaxIDLen caps an id: an app's, and a route's or upstream's name.
	MaxIDLen = 64
)

// IDRule says what ValidID accepts, for error messages.
const IDRule = `must be 1 to 64 characters from a-z, 0-9, "_", "." and "-"`

// ValidID reports whether s is a valid id: 1 to MaxIDLen characters from
// a-z, 0-9, "_", "." and "-". It is levee's one name rule: app ids and
// grants (internal/apps), route, upstream and zone names (internal/config),
// and the upstream names and zones the discovery firewall accepts.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// CheckAppName returns the problem with an app's display name, or "".
func CheckAppName(s string) string {
	if s == "" || len(s) > MaxAppNameLen {
		return fmt.Sprintf("must be 1 to %d bytes", MaxAppNameLen)
	}
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "must be text without control characters"
	}
	return ""
}

// Interval returns the emission interval of rate: 1/rate rounded to the
// nanosecond. Meaningful only for a rate CheckRate accepts.
func Interval(rate float64) time.Duration {
	return time.Duration(math.Round(1e9 / rate))
}

// CheckRate returns the problem with a rate in requests per second, or "".
// A rate must be a finite number greater than 0, at most MaxRate, and
// its interval at most MaxInterval. (0, where a caller allows it, means
// "no rate limit" and is the caller's to handle.)
func CheckRate(rate float64) string {
	switch {
	case math.IsNaN(rate) || math.IsInf(rate, 0) || rate <= 0:
		return fmt.Sprintf("must be a number of requests per second greater than 0, got %v", rate)
	case rate > MaxRate:
		return fmt.Sprintf("must be at most %g requests per second, got %v", float64(MaxRate), rate)
	case Interval(rate) > MaxInterval:
		return fmt.Sprintf("must be at least one request per %v (%g per second), got %v", MaxInterval, 1/MaxInterval.Seconds(), rate)
	}
	return ""
}

// CheckBurst returns the problem with a burst under rate, or "": 1 to
// MaxBurst requests, and burst × Interval(rate) at most MaxBurstWindow.
// The window is checked only for a rate CheckRate accepts.
func CheckBurst(rate float64, burst int64) string {
	if burst < 1 || burst > MaxBurst {
		return fmt.Sprintf("must be a whole number from 1 to %d, got %d", MaxBurst, burst)
	}
	if CheckRate(rate) == "" {
		if iv := Interval(rate); burst > int64(MaxBurstWindow/iv) {
			return fmt.Sprintf("at rate %v a burst of %d takes %v to refill; at most %v (burst at most %d)",
				rate, burst, refill(burst, iv), MaxBurstWindow, int64(MaxBurstWindow/iv))
		}
	}
	return ""
}

// refill is burst × iv for messages, without overflowing.
func refill(burst int64, iv time.Duration) string {
	if burst > int64(math.MaxInt64/iv) {
		return fmt.Sprintf("%.3g years", float64(burst)*iv.Seconds()/(365.25*24*3600))
	}
	return (time.Duration(burst) * iv).String()
}

// DefaultBurst is the burst of a rate limit whose burst is not given:
// max(1, ceil(rate)), one second's worth. It passes CheckBurst for every
// rate CheckRate accepts.
func DefaultBurst(rate float64) int64 {
	return max(1, int64(math.Ceil(rate)))
}

// CheckQuotaRequests returns the problem with a quota's request count, or
// "".
func CheckQuotaRequests(n int64) string {
	if n < 1 || n > MaxQuotaRequests {
		return fmt.Sprintf("must be a whole number from 1 to %d, got %d", int64(MaxQuotaRequests), n)
	}
	return ""
}

// CheckQuotaRows returns the problem with a quota's row count, or "".
func CheckQuotaRows(n int64) string {
	if n < 1 || n > MaxQuotaRows {
		return fmt.Sprintf("must be a whole number from 1 to %d, got %d", int64(MaxQuotaRows), n)
	}
	return ""
}

// CheckQuotaBytes returns the problem with a quota's byte count, or "".
func CheckQuotaBytes(n int64) string {
	if n < 1 || n > MaxQuotaBytes {
		return fmt.Sprintf("must be a whole number from 1 to %d, got %d", int64(MaxQuotaBytes), n)
	}
	return ""
}

// CheckQuotaPer returns the problem with a quota's period, or "".
func CheckQuotaPer(per time.Duration) string {
	if per < MinQuotaPer || per > MaxQuotaPer {
		return fmt.Sprintf("must be from %s to %s, got %s", MinQuotaPer, MaxQuotaPer, per)
	}
	return ""
}

// CheckConcurrency returns the problem with an app's max_concurrency, or
// "": 1 to MaxConcurrency (0, "no cap", is the caller's to handle).
func CheckConcurrency(n int64) string {
	if n < 1 || n > MaxConcurrency {
		return fmt.Sprintf("must be a whole number from 1 to %d, got %d", MaxConcurrency, n)
	}
	return ""
}
