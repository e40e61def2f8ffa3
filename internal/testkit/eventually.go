// Package testkit is what levee's tests share: Eventually (poll for a state
// with a deadline, failing with the last observation), a metrics reader
// that fails the test on a missing series, and one fake clock. Only tests
// import it.
package testkit

import (
	"testing"
	"time"
)

// Poll intervals: the first retry comes after firstPoll, each later one
// after twice the previous, up to maxPoll (a state that comes quickly is
// seen quickly; a slow one costs few polls).
const (
	firstPoll = 100 * time.Microsecond
	maxPoll   = 10 * time.Millisecond
)

// Eventually calls cond until it reports ok or timeout has passed, and
// returns how long that took. On timeout it fails t (t.Fatalf, so call it
// from the test's goroutine) with the last thing cond observed. cond runs
// at least once, even with a timeout of 0; a call that blocks is not cut
// short (the deadline is checked between calls).
func Eventually(t testing.TB, timeout time.Duration, cond func() (ok bool, observed string)) time.Duration {
	t.Helper()
	start := time.Now()
	wait := firstPoll
	for {
		ok, observed := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("not within %v (%d ms polled): last observed %s", timeout, time.Since(start).Milliseconds(), observed)
			return time.Since(start)
		}
		time.Sleep(wait) // polling for the state, bounded by timeout
		wait = min(2*wait, maxPoll)
	}
}

// Until is Eventually for a condition with nothing to show: what names the
// awaited state in the failure.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return Eventually(t, timeout, func() (bool, string) {
		if cond() {
			return true, ""
		}
		return false, "not yet " + what
	})
}
