package testkit

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Clock is the one fake clock of levee's tests: its time moves only when a
// test moves it (Advance, Set) or code under test sleeps on it (Sleep), and
// the timers due by then fire, in the order they are due, in the goroutine
// that moved it. It is safe for concurrent use. It has the methods of each
// package's Clock interface (admission: Now, NewTimer; health: Now,
// AfterFunc; client: Now, Sleep); a package whose interface returns its own
// timer type wraps it in a line.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers map[int]*clockTimer
	sleeps []time.Duration
}

type clockTimer struct {
	seq int
	at  time.Time
	f   func()         // AfterFunc's, or nil
	ch  chan time.Time // NewTimer's (buffered 1), or nil
}

// NewClock returns a Clock reading start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, timers: map[int]*clockTimer{}}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since returns the time passed on the clock since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Advance moves the clock by d (a negative d is taken as 0) and fires the
// timers due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(max(d, 0))
	c.fireLocked()
}

// Set moves the clock to t, never backwards, and fires the timers due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.fireLocked()
}

// fireLocked takes the timers due off the list, unlocks c and fires them
// in the order they are due (then the order they were made), so a timer's
// function may use the clock.
func (c *Clock) fireLocked() {
	var due []*clockTimer
	for seq, tm := range c.timers {
		if !tm.at.After(c.now) {
			due = append(due, tm)
			delete(c.timers, seq)
		}
	}
	now := c.now
	c.mu.Unlock()
	slices.SortFunc(due, func(a, b *clockTimer) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	for _, tm := range due {
		if tm.f != nil {
			tm.f()
			continue
		}
		select {
		case tm.ch <- now:
		default: // buffered 1 and sent at most once: never full
		}
	}
}

// add registers a timer due in d and returns it.
func (c *Clock) add(d time.Duration, f func(), ch chan time.Time) *clockTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	tm := &clockTimer{seq: c.seq, at: c.now.Add(d), f: f, ch: ch}
	c.timers[tm.seq] = tm
	return tm
}

// stop removes tm and reports whether it had not fired yet.
func (c *Clock) stop(tm *clockTimer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.timers[tm.seq]
	delete(c.timers, tm.seq)
	return ok
}

// AfterFunc calls f once d has passed on the clock, in the goroutine that
// moves it (with d <= 0: at once, in this one); stop cancels the call and
// reports whether it did so before f ran, as (*time.Timer).Stop.
func (c *Clock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	tm := c.add(d, f, nil)
	if d <= 0 {
		c.Advance(0)
	}
	return func() bool { return c.stop(tm) }
}

// Timer is a NewTimer timer: C delivers the clock's time once it is due.
type Timer struct {
	c  *Clock
	tm *clockTimer
}

// NewTimer returns a timer that fires once d has passed on the clock.
func (c *Clock) NewTimer(d time.Duration) *Timer {
	tm := c.add(d, nil, make(chan time.Time, 1))
	if d <= 0 {
		c.Advance(0)
	}
	return &Timer{c: c, tm: tm}
}

// C is the channel the timer fires on.
func (t *Timer) C() <-chan time.Time { return t.tm.ch }

// Stop stops the timer and reports whether it had not fired yet.
func (t *Timer) Stop() bool { return t.c.stop(t.tm) }

// Sleep never waits: it records d, moves the clock by d (firing the timers
// due) and returns nil; or ctx.Err() at once when ctx is done.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.mu.Unlock()
	c.Advance(d)
	return nil
}

// Sleeps returns the durations Sleep was called with, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

// Pending returns how many timers have not fired or been stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
