// Package rollback decides whether a change levee applied (a file reload,
// a data-API publish, ...) hurt the node, and keeps what that decision
// needs across restarts: the numbered versions, the last good one, the
// pinned bad ones and the recent starts (crash loops). It is pure apart
// from its state file: time is a parameter of every decision, and the
// gateway samples the node's health and applies the reverts.
package rollback

import (
	"sync"
	"time"
)

// Kind is what a change was; it labels levee_rollbacks_total.
type Kind string

// The kinds of change, as levee_rollbacks_total's kind label.
const (
	KindReload   Kind = "reload"
	KindAdmin    Kind = "admin"
	KindDataAPI  Kind = "data_api"
	KindRegistry Kind = "registry"
)

// Kinds lists every kind, in the order the metric's series are declared.
var Kinds = []Kind{KindReload, KindAdmin, KindDataAPI, KindRegistry}

// Options are the watcher's thresholds (config's `rollback` block).
type Options struct {
	// Window is how long a change is watched, and how far back the
	// "before" ratio looks.
	Window time.Duration
	// MaxErrorRatio is the rise of the own-5xx ratio (after minus before)
	// at or above which a change is judged to have hurt.
	MaxErrorRatio float64
	// MinRequests is how many requests must have been answered since the
	// change before the ratio is judged (fewer: no verdict on errors).
	MinRequests uint64
}

// Sample is the node's health at one moment: cumulative counters (never
// reset while the process runs) and the readiness.
type Sample struct {
	// Requests answered and, among them, the 502/503/504 refusals levee
	// made itself (not an upstream's own 5xx passed on, not admission's
	// sheds).
	Requests, Errors uint64
	// Ready is /readyz's verdict.
	Ready bool
	// Panics counts the handler panics recovered (cumulative).
	Panics uint64
	// Waiting is set while an upstream has no endpoint set yet (its
	// registry has not delivered since it started, and it has no static
	// endpoints): the node's own 503s then are its start's, not a change's.
	Waiting bool
}

// Change is one applied change being watched.
type Change struct {
	// Version is its number in the Store.
	Version int
	Kind    Kind
	// Subject names what changed ("config", a data API's name, ...).
	Subject string
	// Digest identifies the content (what a pin refuses).
	Digest string
}

// maxPending bounds the changes watched at once: an older one is judged
// good early when a newer one would exceed it (logged by the caller).
const maxPending = 32

// maxPoints bounds the samples kept for the "before" ratio; Tick is called
// about ten times a window, so 256 is ample, and the oldest go first.
const maxPoints = 256

type point struct {
	at time.Time
	s  Sample
}

type watch struct {
	c      Change
	at     time.Time
	base   Sample  // at the change
	before float64 // own-5xx ratio over the window before it
	// panicsBefore: handler panics recovered over the window before it.
	panicsBefore uint64
	// waiting: begun while an upstream waited for its first endpoint set;
	// measured from when none waits (base and at moved there), or from one
	// window after the change at the latest.
	waiting bool
}

// Verdict is what Tick decided: Good changes survived their window; Bad,
// when not zero, is the change to revert and pin: the newest one watched
// when any of them hurt. The others watched then are measured again from
// now (what went wrong so far is the reverted change's), so that harm
// that goes on is laid on the next newest at a later Tick.
type Verdict struct {
	Good []Change
	Bad  Change
	// Why says what hurt ("own 5xx ratio 1.00 (before 0.00) over 40
	// requests", "not ready at the end of the window").
	Why string
}

// Watcher watches changes against the node's health. Safe for concurrent
// use.
type Watcher struct {
	opts    Options
	mu      sync.Mutex
	points  []point
	pending []watch
}

// NewWatcher returns a watcher with opts.
func NewWatcher(opts Options) *Watcher {
	return &Watcher{opts: opts}
}

// Begin starts watching c, applied at now, the node's health then being
// cur. It returns the change judged good early to keep the bound (zero
// Version: none).
func (w *Watcher) Begin(now time.Time, cur Sample, c Change) (early Change) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.add(now, cur)
	before, panicsBefore := 0.0, uint64(0)
	if len(w.points) > 0 {
		// the oldest point kept is at most one window old (add trims)
		first := w.points[0].s
		before = ratio(cur.Requests-first.Requests, cur.Errors-first.Errors)
		panicsBefore = cur.Panics - first.Panics
	}
	if len(w.pending) == maxPending {
		early = w.pending[0].c
		w.pending = append(w.pending[:0], w.pending[1:]...)
	}
	w.pending = append(w.pending, watch{c: c, at: now, base: cur, before: before, panicsBefore: panicsBefore, waiting: cur.Waiting})
	return early
}

// settle moves the start of each watch begun while an upstream waited
// for its first endpoint set: while one still waits (for at most one
// window after the change), what the node answered does not count; once
// none does, or the window has passed, the change is measured from now,
// for a whole window. A start with file discovery and no static endpoints
// answers 503 until its registry delivers: that is not the change's harm.
func (w *Watcher) settle(now time.Time, cur Sample) {
	for i := range w.pending {
		p := &w.pending[i]
		if !p.waiting {
			continue
		}
		p.base = cur
		if !cur.Waiting || now.Sub(p.at) >= w.opts.Window {
			p.waiting, p.at = false, now
		}
	}
}

// Watching reports how many changes are being watched.
func (w *Watcher) Watching() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// Rebase measures every watched change again from cur: the caller's
// revert of a bad change has completed, and what went wrong until then was
// that change's (the answers in flight during the revert included).
func (w *Watcher) Rebase(cur Sample) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.pending {
		w.pending[i].base = cur
	}
}

// Tick records the health cur at now and judges the watched changes.
func (w *Watcher) Tick(now time.Time, cur Sample) Verdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.add(now, cur)
	w.settle(now, cur)
	var v Verdict
	for _, p := range w.pending {
		if p.waiting {
			continue
		}
		if why, hurt := w.hurt(now, cur, p); hurt {
			v.Why = why
			last := len(w.pending) - 1
			v.Bad = w.pending[last].c
			w.pending = w.pending[:last]
			for i := range w.pending {
				w.pending[i].base = cur
			}
			return v
		}
	}
	keep := w.pending[:0]
	for _, p := range w.pending {
		if !p.waiting && now.Sub(p.at) >= w.opts.Window {
			v.Good = append(v.Good, p.c)
		} else {
			keep = append(keep, p)
		}
	}
	w.pending = keep
	return v
}

// hurt judges one watched change: a handler panic recovered since the
// change when the window before it had none (at once: a panic is a bug,
// not noise); its own-5xx ratio since the change against the one before
// it, once MinRequests were answered; and the readiness once its window
// has passed.
func (w *Watcher) hurt(now time.Time, cur Sample, p watch) (string, bool) {
	if panics := cur.Panics - p.base.Panics; panics > 0 && p.panicsBefore == 0 {
		return itoa(panics) + " handler panic(s) recovered since the change (none in the window before)", true
	}
	n := cur.Requests - p.base.Requests
	if n >= w.opts.MinRequests && n > 0 {
		after := ratio(n, cur.Errors-p.base.Errors)
		if after-p.before >= w.opts.MaxErrorRatio {
			return "own 5xx ratio " + fmt2(after) + " (before " + fmt2(p.before) + ") over " + itoa(n) + " requests", true
		}
	}
	if now.Sub(p.at) >= w.opts.Window && !cur.Ready {
		return "not ready at the end of the window", true
	}
	return "", false
}

// add keeps cur and drops the points older than one window, keeping at
// most maxPoints.
func (w *Watcher) add(now time.Time, cur Sample) {
	w.points = append(w.points, point{now, cur})
	drop := 0
	for drop < len(w.points)-1 && now.Sub(w.points[drop].at) > w.opts.Window {
		drop++
	}
	if over := len(w.points) - drop - maxPoints; over > 0 {
		drop += over
	}
	if drop > 0 {
		w.points = append(w.points[:0], w.points[drop:]...)
	}
}

func ratio(n, errs uint64) float64 {
	if n == 0 {
		return 0
	}
	return float64(errs) / float64(n)
}
