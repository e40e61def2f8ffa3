package client

import (
	"testing"
	"time"
)

// FuzzParseRetryAfter: any header value, at any time, parses without panic
// to a duration in [0, MaxParsedRetryAfter], and to 0 when it is refused.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{
		"0", "120", " 7 ", "-1", "1.5", "99999999999999999999999",
		"Sat, 01 Mar 2025 12:00:30 GMT", "Saturday, 01-Mar-25 12:01:00 GMT", "Sat Mar  1 12:00:10 2025",
		"Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT", "", "\x00", "٥",
	} {
		f.Add(s, int64(1_740_830_400))
	}
	f.Fuzz(func(t *testing.T, v string, unix int64) {
		now := time.Unix(unix, 0)
		d, ok := ParseRetryAfter(v, now)
		if d < 0 || d > MaxParsedRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v, outside [0, %v]", v, d, MaxParsedRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) refused the value but returned %v", v, d)
		}
	})
}
