package client

import (
	"net/http"
	"strings"
	"time"
)

// MaxParsedRetryAfter is the largest duration ParseRetryAfter returns: 2^31
// seconds, the value RFC 9111 (section 1.2.2) tells caches to use for a
// delta-seconds too large to represent.
const MaxParsedRetryAfter = (1 << 31) * time.Second

// ParseRetryAfter parses a Retry-After header value (RFC 9110, section
// 10.2.3) into how long to wait from now. It accepts delta-seconds (one or
// more digits, surrounded by optional whitespace) and an HTTP-date in any of
// the three forms RFC 9110 allows (IMF-fixdate, RFC 850, asctime). A date in
// the past gives 0. Results are capped at MaxParsedRetryAfter. It returns
// false, and 0, for an empty value, a negative or fractional number, or
// anything else it cannot parse.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		const capSecs = int64(MaxParsedRetryAfter / time.Second)
		var secs int64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			if secs < capSecs {
				secs = min(capSecs, secs*10+int64(c-'0'))
			}
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now) // saturates instead of overflowing
	return min(MaxParsedRetryAfter, max(0, d)), true
}
