package admission

import "time"

// Clock is the limiter's only source of time: Now for latency samples and
// the adaptive limit's windows, NewTimer for a queued request's wait. Tests
// inject a fake; nil in Options means the real clock.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the limiter uses. C delivers one value
// when the timer fires; Stop reports whether it stopped the timer before it
// fired.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
