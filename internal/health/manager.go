package health

// The Manager: one goroutine that owns every health decision, and a bounded
// pool of check workers.
//
// LOOP. Manager.run waits for the earliest of: a check result, an outlier
// signal, a kick (Apply changed the schedule), the next due check, the next
// timed event (an ejection ending, a slow-start step) and the next allowed
// rebuild. It applies what happened under mu, then, without mu, calls
// Options.OnChange with the upstreams whose effective endpoint set changed.
// Each upstream is rebuilt at most once per minRebuildGap; transitions in
// between are coalesced into one rebuild.
//
// BOUNDS. At most Options.Workers (default MaxConcurrentChecks = 64)
// checks run at once, whatever the number of endpoints; a check due while
// every worker is busy waits for one (the schedule then slips, it does not
// pile up: one endpoint has at most one check queued or running). Each
// check is bounded by its Timeout. Due checks live in a heap (O(log n) per
// check). An outlier signal costs one scan of the upstreams' members. Timed
// events are recomputed with one scan after each transition, never per
// check.
//
// LOCKING. mu guards the upstreams and their members. The loop never holds
// mu while calling OnChange, so OnChange may call Apply (which takes mu).
// Lock order for callers: their own locks, then mu.

import (
	"container/heap"
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

// MaxConcurrentChecks is the default bound on checks running at once.
const MaxConcurrentChecks = 64

// minRebuildGap is the shortest time between two OnChange calls for one
// upstream.
const minRebuildGap = 50 * time.Millisecond

// maxResultBatch bounds the check results handled per loop turn before
// rebuilds are considered.
const maxResultBatch = 256

// Options configure a Manager.
type Options struct {
	// Logger receives one line per transition. Required.
	Logger *slog.Logger
	// OnChange is called from the Manager's goroutine, without its lock,
	// with the upstreams whose effective endpoints changed; the owner
	// rebuilds their pickers by calling Apply. It may block briefly (it
	// delays the next decisions, never a request). Required.
	OnChange func(upstreams []string)
	// Probe runs one check; nil means Probe (real HTTP or TCP).
	Probe func(ctx context.Context, addr string, c *CheckOptions) error
	// Workers bounds concurrent checks; 0 means MaxConcurrentChecks.
	Workers int
	// Clock is the source of time for every decision and wait (check
	// schedule and timeouts, ejection ends, slow-start steps); nil means
	// the real clock.
	Clock Clock
}

// Manager tracks the health of every upstream's endpoints. Build it with
// New, feed it endpoint sets with Apply, run it with Start and stop it with
// Stop. Safe for concurrent use.
type Manager struct {
	o       Options
	trip    chan struct{} // outlier signals from endpoint.Stats
	kick    chan struct{} // Apply changed the schedule
	jobs    chan job
	results chan result
	stop    chan struct{}
	wake    chan struct{} // the loop's timer fired
	cancel  context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup
	once    sync.Once
	started bool

	mu struct {
		sync.Mutex
		ups         map[string]*upstream
		due         dueHeap
		outstanding int       // checks handed to workers and not yet returned
		nextTimed   time.Time // earliest ejection end or ramp step; zero: none
		dirty       map[string]bool
		lastRebuild map[string]time.Time
	}
}

type upstream struct {
	name    string
	opts    UpstreamOptions
	members map[string]*member
	seeded  bool // the first set has been applied
	panic   bool
	panics  uint64
	ejects  map[string]uint64
	watch   *endpoint.Watch
}

// New returns a Manager; it starts nothing.
func New(o Options) *Manager {
	if o.Probe == nil {
		o.Probe = Probe
	}
	if o.Workers <= 0 {
		o.Workers = MaxConcurrentChecks
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	m := &Manager{
		o:       o,
		trip:    make(chan struct{}, 1),
		kick:    make(chan struct{}, 1),
		jobs:    make(chan job, o.Workers),
		results: make(chan result, o.Workers),
		stop:    make(chan struct{}),
		wake:    make(chan struct{}, 1),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.mu.ups = map[string]*upstream{}
	m.mu.dirty = map[string]bool{}
	m.mu.lastRebuild = map[string]time.Time{}
	return m
}

// Start runs the loop and the check workers until Stop.
func (m *Manager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return
	}
	m.started = true
	m.wg.Add(1 + m.o.Workers)
	for range m.o.Workers {
		go m.worker()
	}
	go m.run()
}

// Stop ends the loop and the workers, cancelling checks in flight, and
// waits for them. It is safe to call without Start and more than once.
func (m *Manager) Stop() {
	m.once.Do(func() {
		close(m.stop)
		m.cancel()
	})
	m.wg.Wait()
}

func (m *Manager) run() {
	defer m.wg.Done()
	stopTimer := func() bool { return false }
	defer func() { stopTimer() }()
	for {
		now := m.o.Clock.Now()
		m.mu.Lock()
		m.dispatchLocked(now)
		if t := m.mu.nextTimed; !t.IsZero() && !now.Before(t) {
			m.timedLocked(now)
		}
		ready, wake := m.takeDirtyLocked(now)
		if w := m.nextWakeLocked(); !w.IsZero() && (wake.IsZero() || w.Before(wake)) {
			wake = w
		}
		m.mu.Unlock()
		if len(ready) > 0 {
			m.o.OnChange(ready)
			continue
		}
		wait := time.Hour
		if !wake.IsZero() {
			wait = max(time.Millisecond, wake.Sub(now))
		}
		stopTimer()
		select { // a wake-up left by the timer just stopped is stale
		case <-m.wake:
		default:
		}
		stopTimer = m.o.Clock.AfterFunc(wait, m.fire)
		select {
		case <-m.stop:
			return
		case <-m.kick:
		case <-m.trip:
			m.mu.Lock()
			m.tripsLocked(m.o.Clock.Now())
			m.mu.Unlock()
		case r := <-m.results:
			m.mu.Lock()
			m.resultLocked(r, m.o.Clock.Now())
			for range maxResultBatch - 1 {
				select {
				case r = <-m.results:
					m.resultLocked(r, m.o.Clock.Now())
					continue
				default:
				}
				break
			}
			m.mu.Unlock()
		case <-m.wake:
		}
	}
}

// fire wakes the loop when its timer runs out, without blocking.
func (m *Manager) fire() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// poke wakes the loop without blocking.
func (m *Manager) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// nextWakeLocked is the earliest of the next due check (when a worker is
// free) and the next timed event.
func (m *Manager) nextWakeLocked() time.Time {
	var w time.Time
	if len(m.mu.due) > 0 && m.mu.outstanding < m.o.Workers {
		w = m.mu.due[0].nextCheck
	}
	if t := m.mu.nextTimed; !t.IsZero() && (w.IsZero() || t.Before(w)) {
		w = t
	}
	return w
}

// Plan is the endpoint set an upstream's picker is built from, as Apply
// decides it at one instant.
type Plan struct {
	// Endpoints is parallel to Apply's input. Each is the input endpoint
	// itself when its weight is unchanged, else a copy with the effective
	// weight that shares the input's Stats: 0 for an endpoint that does
	// not serve, a ramped weight during slow start. In panic mode every
	// non-drained endpoint keeps its configured weight.
	Endpoints []*endpoint.Endpoint
	// Healthy[i] reports whether endpoint i serves (outside panic mode);
	// zone shares count the configured weight of these.
	Healthy []bool
	// Panic is true when the healthy share of the non-drained weight is
	// below the panic threshold.
	Panic bool
}

// Apply records upstream name's options and endpoint set (addresses
// unique, Stats non-nil, as the gateway builds them) and returns the plan
// to build its picker from, at the current time. New endpoints start
// healthy; after the upstream's first set, new and undrained endpoints
// start in slow start.
// Endpoints no longer in eps are forgotten. O(len(eps)).
func (m *Manager) Apply(name string, o UpstreamOptions, eps []*endpoint.Endpoint) Plan {
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.mu.ups[name]
	if u == nil {
		u = &upstream{name: name, members: map[string]*member{}, ejects: map[string]uint64{}}
		m.mu.ups[name] = u
	}
	u.setOptions(o, m.trip)
	seen := make(map[string]bool, len(eps))
	scheduled := false
	for _, e := range eps {
		seen[e.Address] = true
		mb := u.members[e.Address]
		if mb == nil {
			mb = &member{up: u, addr: e.Address, heapIdx: -1, since: now, state: Healthy}
			u.members[e.Address] = mb
			if u.seeded && e.Weight > 0 {
				m.startRampLocked(mb, now)
			}
		}
		if mb.weight == 0 && e.Weight > 0 && u.seeded {
			m.startRampLocked(mb, now) // undrained: it joins again
		}
		mb.weight = e.Weight
		if mb.stats != e.Stats {
			mb.stats = e.Stats
			mb.stats.SetWatch(u.watch)
		}
		if c := o.Check; c != nil && mb.heapIdx < 0 {
			mb.nextCheck = now.Add(time.Duration(rand.Int64N(int64(c.Interval))))
			heap.Push(&m.mu.due, mb)
			scheduled = true
		}
		if o.Check == nil {
			mb.checkDown, mb.passes, mb.fails = false, 0, 0
		}
		if mb.ejected() && (mb.refusedOut && o.Refused == nil || !mb.refusedOut && o.Outlier == nil) {
			mb.uneject(now) // the rule that ejected it was turned off
		}
		if s := mb.currentState(o.SlowStart, now); s != mb.state {
			m.o.Logger.Info("endpoint health changed", "upstream", name, "endpoint", mb.addr,
				"from", string(mb.state), "to", string(s), "reason", "endpoint_set_changed")
			mb.state, mb.since, mb.reason = s, now, "endpoint_set_changed"
		}
	}
	for addr, mb := range u.members {
		if !seen[addr] {
			mb.removed = true
			mb.stats.SetWatch(nil)
			if mb.heapIdx >= 0 {
				heap.Remove(&m.mu.due, mb.heapIdx)
			}
			delete(u.members, addr)
		}
	}
	u.seeded = true
	p := m.planLocked(u, eps, now)
	m.recomputeTimedLocked(now)
	if scheduled || !m.mu.nextTimed.IsZero() {
		m.poke()
	}
	return p
}

// setOptions installs o, and the outlier watch on every member when it
// changed.
func (u *upstream) setOptions(o UpstreamOptions, signal chan<- struct{}) {
	var w *endpoint.Watch
	if ol := o.Outlier; ol != nil {
		w = &endpoint.Watch{GatewayFailures: ol.ConsecutiveGatewayFailures, Status5xx: ol.Consecutive5xx, Signal: signal}
	} else if o.Refused != nil {
		w = &endpoint.Watch{Signal: signal} // signals refused connections only
	}
	same := (w == nil) == (u.watch == nil) && (w == nil || (w.GatewayFailures == u.watch.GatewayFailures && w.Status5xx == u.watch.Status5xx))
	u.opts = o
	if same {
		return
	}
	u.watch = w
	for _, mb := range u.members {
		mb.stats.SetWatch(w)
	}
}

// planLocked computes u's plan at now and counts entries into panic mode.
func (m *Manager) planLocked(u *upstream, eps []*endpoint.Endpoint, now time.Time) Plan {
	p, _ := plan(eps, func(i int) (serving bool, rampFrom time.Time) {
		mb := u.members[eps[i].Address]
		return mb.serving(), mb.rampFrom
	}, u.opts.PanicThreshold, u.opts.SlowStart, now)
	if p.Panic != u.panic {
		u.panic = p.Panic
		if p.Panic {
			u.panics++
			m.o.Logger.Warn("upstream in panic mode: too few healthy endpoints; balancing over all non-drained endpoints", "upstream", u.name,
				"panic_threshold", u.opts.PanicThreshold)
		} else {
			m.o.Logger.Info("upstream out of panic mode", "upstream", u.name)
		}
	}
	return p
}

// Retain forgets the upstreams not in names.
func (m *Manager) Retain(names map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, u := range m.mu.ups {
		if names[name] {
			continue
		}
		for _, mb := range u.members {
			mb.removed = true
			mb.stats.SetWatch(nil)
			if mb.heapIdx >= 0 {
				heap.Remove(&m.mu.due, mb.heapIdx)
			}
		}
		delete(m.mu.ups, name)
		delete(m.mu.dirty, name)
		delete(m.mu.lastRebuild, name)
	}
}

// View returns upstream name's health, endpoints in address order of
// eps as last applied (map order otherwise); ok is false for an unknown
// upstream.
func (m *Manager) View(name string) (v UpstreamView, ok bool) {
	now := m.o.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.mu.ups[name]
	if u == nil {
		return v, false
	}
	v = UpstreamView{Panic: u.panic, PanicTotal: u.panics, EjectionsTotal: make(map[string]uint64, len(u.ejects))}
	for k, n := range u.ejects {
		v.EjectionsTotal[k] = n
	}
	for _, mb := range u.members {
		v.Endpoints = append(v.Endpoints, u.viewOf(mb, now))
	}
	return v, true
}
