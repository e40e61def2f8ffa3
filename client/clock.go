package client

import (
	"context"
	"time"
)

// Clock is the Transport's source of time. The real clock is used when
// Options.Clock is nil; tests inject a fake that records waits and moves its
// time forward instead of sleeping.
//
// Now's readings are compared with context deadlines, so a fake clock that
// is used with deadlines should start from time.Now().
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d, or until ctx is done, in which case it returns
	// ctx.Err() at once. A d of zero or less returns ctx.Err() without
	// waiting. Sleep must start no goroutine that outlives it.
	Sleep(ctx context.Context, d time.Duration) error
}

// realClock is the wall clock; Sleep uses one timer, stopped on return.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
