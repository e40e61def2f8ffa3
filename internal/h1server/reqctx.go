package h1server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// reqCtx is the context of one request served by the loop: done when the
// handler returned, the client went away (the watcher) or the server
// closed the connection. It replaces context.WithCancel(Background), whose
// cancel closure is an allocation of its own, and it offers the upstream
// fast path (internal/upstream) a hook slot that costs no allocation:
// context.AfterFunc costs two (its context and its stop function), plus,
// on a fresh request context, the parent's Done channel and children map.
//
// One is made per request and never reused, so a goroutine that kept a
// request's context sees it done forever after.
type reqCtx struct {
	canceled atomic.Bool
	mu       sync.Mutex
	done     chan struct{} // made by the first Done (closedChan once canceled)
	// hook is DoneHook's function, run once by cancel; hookSet: the slot
	// is taken (set, or run) until StopDoneHook.
	hook    func()
	hookSet bool
	// after are AfterFunc's functions not yet run or stopped, in
	// afterBuf while they fit; each call of AfterFunc adds one (the
	// handler's own calls, such as a context.WithCancel of this context),
	// each stop removes its own.
	after    []afterFunc
	afterBuf [2]afterFunc
	afterID  uint64
}

type afterFunc struct {
	id uint64
	f  func()
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// NewRequestContext returns a context of the kind the loop gives each
// request and its cancel function, for tests and benchmarks of handlers
// that want to measure what they cost behind this server.
func NewRequestContext() (context.Context, func()) {
	c := &reqCtx{}
	return c, c.cancel
}

func (c *reqCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *reqCtx) Value(any) any               { return nil }

func (c *reqCtx) Err() error {
	if c.canceled.Load() {
		return context.Canceled
	}
	return nil
}

func (c *reqCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.canceled.Load() {
			c.done = closedChan
		} else {
			c.done = make(chan struct{})
		}
	}
	return c.done
}

func (c *reqCtx) String() string { return "h1server.requestContext" }

// cancel ends the context: Done closes, Err says Canceled, the hook runs in
// this goroutine (it must be short and must not block: the upstream's sets
// a past deadline) and every AfterFunc function in its own goroutine, as
// context.AfterFunc runs them. Later calls do nothing.
func (c *reqCtx) cancel() {
	c.mu.Lock()
	if c.canceled.Load() {
		c.mu.Unlock()
		return
	}
	c.canceled.Store(true)
	if c.done != nil {
		close(c.done)
	} else {
		c.done = closedChan
	}
	hook := c.hook
	c.hook = nil
	after := c.after
	c.after = nil
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	for _, a := range after {
		go a.f()
	}
}

// DoneHook arranges for f to run once when the context is done (at once,
// in this goroutine, when it is already), without allocating. There is one
// slot: it reports false, doing nothing, while another hook holds it (the
// caller then uses context.AfterFunc). StopDoneHook frees the slot.
func (c *reqCtx) DoneHook(f func()) bool {
	c.mu.Lock()
	if c.hookSet {
		c.mu.Unlock()
		return false
	}
	c.hookSet = true
	if c.canceled.Load() {
		c.mu.Unlock()
		f()
		return true
	}
	c.hook = f
	c.mu.Unlock()
	return true
}

// StopDoneHook frees the hook slot and reports whether it stopped the hook
// before it ran, as the stop function of context.AfterFunc does.
func (c *reqCtx) StopDoneHook() bool {
	c.mu.Lock()
	stopped := c.hook != nil
	c.hook, c.hookSet = nil, false
	c.mu.Unlock()
	return stopped
}

// AfterFunc makes the context an afterFuncer for the context package, so
// that a context derived from it (context.WithCancel, WithTimeout) follows
// it without a goroutine of its own. f runs in its own goroutine. It costs
// one allocation (the stop function) while two are pending at once.
func (c *reqCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.canceled.Load() {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	if c.after == nil {
		c.after = c.afterBuf[:0]
	}
	c.afterID++
	id := c.afterID
	c.after = append(c.after, afterFunc{id: id, f: f})
	c.mu.Unlock()
	return func() bool { return c.stopAfter(id) }
}

// stopAfter removes AfterFunc's function id and reports whether it was
// still pending.
func (c *reqCtx) stopAfter(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, a := range c.after {
		if a.id == id {
			c.after = append(c.after[:i], c.after[i+1:]...)
			c.after[len(c.after):cap(c.after)][0] = afterFunc{} // no stale f kept alive
			return true
		}
	}
	return false
}
