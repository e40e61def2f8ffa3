// Package memguard keeps levee out of garbage-collection thrash and the
// out-of-memory killer. It sets the Go runtime's soft memory limit and
// watches the live heap (runtime/metrics): above a soft watermark the
// request path refuses sheddable work, above a hard watermark everything
// but critical work, until the heap falls back (with a little hysteresis,
// so the level does not flap on every sample).
package memguard

import (
	"errors"
	"fmt"
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
	// Heap reports the current heap size in bytes; nil reads
	// runtime/metrics. Tests inject one.
	Heap func() uint64
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
	return &Guard{
		opts:  o,
		soft:  uint64(float64(o.Limit) * o.SoftWatermark),
		hard:  uint64(float64(o.Limit) * o.HardWatermark),
		slack: uint64(float64(o.Limit) * hysteresis),
	}, nil
}

// Level returns the current pressure level.
func (g *Guard) Level() Level { return Level(g.level.Load()) }

// HeapBytes returns the heap size at the last sample.
func (g *Guard) HeapBytes() uint64 { return g.heapBytes.Load() }

// Observe updates the level from a heap size (Start's loop calls it with
// each sample; tests call it directly).
func (g *Guard) Observe(heap uint64) Level {
	g.heapBytes.Store(heap)
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
			g.Observe(g.opts.Heap())
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

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

func readHeap() uint64 {
	s := []metrics.Sample{heapSample[0]}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
