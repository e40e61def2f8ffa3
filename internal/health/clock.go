package health

import (
	"context"
	"time"
)

// Clock is the Manager's only source of time: Now for every decision
// (check schedule, ejection ends, slow-start steps, rebuild spacing, the
// views), AfterFunc for the loop's wake-ups and each check's timeout. Tests
// inject a fake they step; nil in Options means the real clock.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f, in its own goroutine or the one that moves the
	// clock, once d has passed; stop cancels the call and reports whether
	// it did so before f ran (as (*time.Timer).Stop).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// checkContext bounds one check by d on c: the context is done when d has
// passed on c (Err then reports context.DeadlineExceeded, as
// context.WithTimeout's would) or parent is done, and its Deadline is now+d
// on c, which Probe gives its connection.
func checkContext(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	deadline := c.Now().Add(d) // read first: the timer then fires at or after it
	ctx, cancel := context.WithCancelCause(parent)
	stop := c.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return &boundedContext{Context: ctx, deadline: deadline}, func() {
		stop()
		cancel(context.Canceled)
	}
}

// boundedContext is a cancellable context with a deadline on a Clock.
type boundedContext struct {
	context.Context
	deadline time.Time
}

func (b *boundedContext) Deadline() (time.Time, bool) { return b.deadline, true }

// Err reports why the context is done: context.DeadlineExceeded when its
// time ran out, the parent's error when the parent ended first.
func (b *boundedContext) Err() error {
	if b.Context.Err() == nil {
		return nil
	}
	return context.Cause(b.Context)
}
