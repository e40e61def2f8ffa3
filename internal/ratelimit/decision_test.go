package ratelimit

import (
	"net/http"
	"testing"
	"time"
)

func TestHeaderRounding(t *testing.T) {
	for _, c := range []struct {
		d                 time.Duration
		reset, retryAfter int64
	}{
		{0, 0, 1}, {1, 1, 1}, {time.Second, 1, 1}, {time.Second + 1, 2, 2}, {59*time.Second + 999999999, 60, 60},
	} {
		d := Decision{Reset: c.d, RetryAfter: c.d}
		if d.ResetSeconds() != c.reset || d.RetryAfterSeconds() != c.retryAfter {
			t.Errorf("%v: reset %d retry-after %d, want %d %d", c.d, d.ResetSeconds(), d.RetryAfterSeconds(), c.reset, c.retryAfter)
		}
	}
}

func TestSetHeaders(t *testing.T) {
	h := http.Header{}
	h.Set(HeaderRetryAfter, "stale")
	Decision{Allowed: true, Limit: 100, Remaining: 99, Reset: 1500 * time.Millisecond}.SetHeaders(h)
	want := map[string]string{HeaderLimit: "100", HeaderRemaining: "99", HeaderReset: "2", HeaderRetryAfter: ""}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("allowed: %s = %q, want %q", k, got, v)
		}
	}
	Decision{Limit: 5000, Reset: 3 * time.Hour, RetryAfter: 3 * time.Hour}.SetHeaders(h)
	want = map[string]string{HeaderLimit: "5000", HeaderRemaining: "0", HeaderReset: "10800", HeaderRetryAfter: "10800"}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("refused: %s = %q, want %q", k, got, v)
		}
	}
	// Shared small values must survive Header.Add on the same name.
	Decision{Limit: 7}.SetHeaders(h)
	h.Add(HeaderLimit, "x")
	if smallHeaderValues()[7] != "7" || len(h.Values(HeaderLimit)) != 2 {
		t.Fatalf("Add disturbed the shared values: %q", h.Values(HeaderLimit))
	}
}

func TestAppendHeaders(t *testing.T) {
	got := string(Decision{Limit: 10, RetryAfter: time.Millisecond, Reset: 2 * time.Second}.AppendHeaders(nil))
	want := "RateLimit-Limit: 10\r\nRateLimit-Remaining: 0\r\nRateLimit-Reset: 2\r\nRetry-After: 1\r\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestHeadersDoNotAllocate(t *testing.T) {
	d := Decision{Limit: 100, Remaining: 3, Reset: 20 * time.Second, RetryAfter: time.Second}
	h := http.Header{}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { d.SetHeaders(h) }); n != 0 {
		t.Errorf("SetHeaders: %v allocs", n)
	}
	if n := testing.AllocsPerRun(100, func() { buf = d.AppendHeaders(buf[:0]) }); n != 0 {
		t.Errorf("AppendHeaders: %v allocs", n)
	}
}

func TestHeaderKeysAreCanonical(t *testing.T) {
	for _, k := range []string{keyLimit, keyRemaining, keyReset, HeaderRetryAfter} {
		if http.CanonicalHeaderKey(k) != k {
			t.Errorf("%q is not canonical", k)
		}
	}
	for k, n := range map[string]string{keyLimit: HeaderLimit, keyRemaining: HeaderRemaining, keyReset: HeaderReset} {
		if http.CanonicalHeaderKey(n) != k {
			t.Errorf("%q does not canonicalise to %q", n, k)
		}
	}
}
