// Package memguard keeps levee out of garbage-collection thrash and the
// out-of-memory killer. It sets the Go runtime's soft memory limit and
// watches a signal made of the live heap (what the last garbage collection
// marked reachable, runtime/metrics' /gc/heap/live:bytes, so garbage is
// never counted) plus the bytes that admitted requests have reserved from
// the process-wide budget (see Reserve): above a soft watermark the request
// path refuses sheddable work, above a hard watermark everything but
// critical work, until the signal falls back (with a little hysteresis, so
// the level does not flap on every sample).
//
// The reservations are what make the limit hold: the level is read once,
// at admission, but a request that will buffer a body reserves its bytes
// before reading them, so requests admitted a moment before the level rose
// cannot fill the heap behind the guard's back. And because released
// reservations leave the signal at once, pressure ends when the work ends.
package memguard

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// Level is how much memory pressure the process is under.
type Level uint32

const (
	// OK: serve everything.
	OK Level = iota
	// Soft: refuse sheddable requests.
	Soft
	// Hard: refuse everything but critical requests.
	Hard
)

// String returns "ok", "soft" or "hard".
func (l Level) String() string {
	switch l {
	case Soft:
		return "soft"
	case Hard:
		return "hard"
	}
	return "ok"
}

// Options configure a Guard.
type Options struct {
	// Limit is the process's memory budget in bytes; the runtime's soft
	// memory limit is set to it by Start.
	Limit int64
	// SoftWatermark and HardWatermark are fractions of Limit, 0 < soft <
	// hard <= 1.
	SoftWatermark, HardWatermark float64
	// Interval is how often the heap is sampled (default 100ms).
	Interval time.Duration
	// Heap reports the live heap in bytes (what the last garbage
	// collection marked reachable) and the number of collections completed
	// so far; nil reads runtime/metrics. Tests inject one.
	Heap func() (live, cycles uint64)
	// Collect runs a garbage collection, when the live heap reading is
	// stale under pressure (see staleSamples); nil: runtime.GC. Tests
	// inject one.
	Collect func()
}

// hysteresis: a level is left only when the heap falls this fraction of
// Limit below the watermark that raised it.
const hysteresis = 0.02

// Guard tracks the memory pressure level. Level is one atomic load: safe
// to call on every request. The zero value is not usable; use New.
type Guard struct {
	opts      Options
	soft      uint64
	hard      uint64
	slack     uint64
	level     atomic.Uint32
	heapBytes atomic.Uint64
	stop      chan struct{}
	done      chan struct{}
	prevLimit int64

	// The budget (budget.go).
	ceiling  [classes]int64
	reserved atomic.Int64
	refused  atomic.Uint64

	// Sampler state, touched only by Sample's caller (one goroutine).
	lastCycles uint64
	stale      int
	staleLimit int
	// reservedAtCollect: the reservations at the last forced collection.
	reservedAtCollect int64
	collected         atomic.Uint64
}

// New validates o. It changes nothing in the runtime until Start.
func New(o Options) (*Guard, error) {
	var errs []error
	if o.Limit <= 0 {
		errs = append(errs, fmt.Errorf("memory.limit must be above 0, got %d", o.Limit))
	}
	if !(o.SoftWatermark > 0 && o.SoftWatermark < o.HardWatermark && o.HardWatermark <= 1) {
		errs = append(errs, fmt.Errorf("memory watermarks must satisfy 0 < soft < hard <= 1, got soft %v, hard %v", o.SoftWatermark, o.HardWatermark))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if o.Interval <= 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.Heap == nil {
		o.Heap = readHeap
	}
	if o.Collect == nil {
		o.Collect = runtime.GC
	}
	g := &Guard{
		opts:  o,
		soft:  uint64(float64(o.Limit) * o.SoftWatermark),
		hard:  uint64(float64(o.Limit) * o.HardWatermark),
		slack: uint64(float64(o.Limit) * hysteresis),
	}
	g.ceiling = ceilings(o.Limit, g.soft, g.hard)
	g.staleLimit = staleSamples
	return g, nil
}

// Level returns the current pressure level.
func (g *Guard) Level() Level { return Level(g.level.Load()) }

// Limit returns the limit in bytes (Options.Limit).
func (g *Guard) Limit() int64 { return g.opts.Limit }

// HeapBytes returns the live heap at the last sample.
func (g *Guard) HeapBytes() uint64 { return g.heapBytes.Load() }

// Observe updates the level from a live heap size plus the bytes reserved
// now (Sample calls it; tests call it directly). Only one goroutine may
// call it at a time.
func (g *Guard) Observe(live uint64) Level {
	g.heapBytes.Store(live)
	heap := live + uint64(max(g.reserved.Load(), 0))
	cur := g.Level()
	next := OK
	switch {
	case heap >= g.hard:
		next = Hard
	case heap >= g.soft:
		next = Soft
	}
	// Hysteresis on the way down only.
	if next < cur {
		switch cur {
		case Hard:
			if heap+g.slack > g.hard {
				next = Hard
			} else if heap+g.slack > g.soft {
				next = Soft
			}
		case Soft:
			if heap+g.slack > g.soft {
				next = Soft
			}
		}
	}
	g.level.Store(uint32(next))
	return next
}

// staleSamples is how many samples in a row may show pressure with no
// garbage collection completed before Sample runs one. The live heap
// figure only changes when a collection ends; after a burst, the requests
// that held memory are gone but the figure still counts them, and the
// refusals it causes stop the very allocation that would trigger the next
// collection. One forced collection per staleSamples samples (500 ms at
// the default interval) bounds that, and costs nothing while collections
// happen on their own.
//
// A forced collection that leaves the pressure in place found real live
// memory, not garbage; the next one waits twice as long, up to
// maxStaleSamples (8 s), so a large heap under real pressure is not marked
// over and over for nothing. The wait is back to staleSamples once the
// pressure ends, and while reservations are below what they were at the
// last forced collection: requests that held memory have ended since, and
// what they held may be garbage now (this is what keeps the end of a storm
// prompt).
const (
	staleSamples    = 5
	maxStaleSamples = 80
)

// Sample reads the heap, updates the level, and runs a garbage collection
// when the reading is stale under pressure (see staleSamples). Start's
// loop calls it every Interval; tests call it to step the guard.
func (g *Guard) Sample() Level {
	live, cycles := g.opts.Heap()
	if cycles != g.lastCycles {
		g.lastCycles, g.stale = cycles, 0
	}
	lvl := g.Observe(live)
	if lvl == OK {
		g.stale, g.staleLimit = 0, staleSamples
		return lvl
	}
	wait := g.staleLimit
	if g.reserved.Load() < g.reservedAtCollect {
		wait = staleSamples
	}
	if g.stale++; g.stale < wait {
		return lvl
	}
	g.stale = 0
	g.reservedAtCollect = g.reserved.Load()
	g.opts.Collect()
	g.collected.Add(1)
	live, g.lastCycles = g.opts.Heap()
	if lvl = g.Observe(live); lvl != OK {
		g.staleLimit = min(2*g.staleLimit, maxStaleSamples)
	} else {
		g.staleLimit = staleSamples
	}
	return lvl
}

// Collections returns how many garbage collections Sample has forced.
func (g *Guard) Collections() uint64 { return g.collected.Load() }

// Start sets the runtime's soft memory limit and samples the heap every
// Interval on one goroutine until Stop.
func (g *Guard) Start() {
	g.prevLimit = debug.SetMemoryLimit(g.opts.Limit)
	g.stop, g.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(g.done)
		t := time.NewTicker(g.opts.Interval)
		defer t.Stop()
		for {
			g.Sample()
			select {
			case <-g.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the sampling goroutine and restores the memory limit that was
// in force before Start.
func (g *Guard) Stop() {
	if g.stop == nil {
		return
	}
	close(g.stop)
	<-g.done
	g.stop = nil
	debug.SetMemoryLimit(g.prevLimit)
}

// heapMetrics: the live heap (counts only what the last collection marked,
// never garbage, unlike /memory/classes/heap/objects:bytes) and the count
// of completed collections.
var heapMetrics = [2]string{"/gc/heap/live:bytes", "/gc/cycles/total:gc-cycles"}

func readHeap() (live, cycles uint64) {
	s := []metrics.Sample{{Name: heapMetrics[0]}, {Name: heapMetrics[1]}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		live = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		cycles = s[1].Value.Uint64()
	}
	return live, cycles
}
