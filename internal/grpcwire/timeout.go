package grpcwire

import (
	"errors"
	"math"
	"strconv"
	"time"
)

// The grpc-timeout header: TimeoutValue TimeoutUnit, where TimeoutValue is
// 1 to 8 ASCII digits and TimeoutUnit one of H (hours), M (minutes),
// S (seconds), m (milliseconds), u (microseconds), n (nanoseconds).

// maxTimeoutDigits is the spec's bound on TimeoutValue.
const maxTimeoutDigits = 8

// ErrBadTimeout is the error of a grpc-timeout that does not follow the
// grammar.
var ErrBadTimeout = errors.New("grpc-timeout: want 1 to 8 digits and a unit of H, M, S, m, u or n")

// ParseTimeout parses a grpc-timeout value strictly (no sign, no space,
// no other unit). The largest values (99999999H is 11,400 years) exceed a
// time.Duration: they are clamped to the largest Duration, which is no
// deadline in practice. No allocation.
func ParseTimeout(s string) (time.Duration, error) {
	if len(s) < 2 || len(s) > maxTimeoutDigits+1 {
		return 0, ErrBadTimeout
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, ErrBadTimeout
	}
	var v int64 // at most 99999999: no overflow
	for i := 0; i < len(s)-1; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, ErrBadTimeout
		}
		v = v*10 + int64(c-'0')
	}
	if v > int64(math.MaxInt64/unit) {
		return math.MaxInt64, nil
	}
	return time.Duration(v) * unit, nil
}

// AppendTimeout appends d as a grpc-timeout value to b: the finest unit
// whose count fits in 8 digits, rounded up so the deadline sent is never
// earlier than d. d <= 0 is sent as "1n" (already expired: the upstream
// fails it at once rather than waiting for nothing).
func AppendTimeout(b []byte, d time.Duration) []byte {
	if d <= 0 {
		return append(b, "1n"...)
	}
	const most = 99999999
	for _, u := range [...]struct {
		d time.Duration
		c byte
	}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}, {time.Hour, 'H'}} {
		n := d / u.d
		if d%u.d != 0 {
			n++
		}
		if n <= most || u.c == 'H' {
			n = min(n, most)
			b = strconv.AppendInt(b, int64(n), 10)
			return append(b, u.c)
		}
	}
	return b // not reached: the hour case always returns
}
