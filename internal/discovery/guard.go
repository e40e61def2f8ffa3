package discovery

import (
	"fmt"
	"sync"
	"time"
)

// Delta guard: no registry update may take away too much capacity at once.
//
// For the instances being served (current) and an update (next):
//
//	active(current)  = Σ weight of current's instances with weight > 0
//	dropped          = Σ weight of current's active instances whose address
//	                   is missing from next or has weight 0 in next
//	DropFraction     = dropped / active(current)   (0 when active(current) = 0)
//
// Weight that moves to new addresses does not offset a drop, and a weight
// that shrinks without reaching 0 is not a drop (the instance still takes
// traffic). An update with DropFraction ≤ MaxDropFraction applies at once.
// A larger one is held: the previous list keeps serving until the same
// update (see Identical) has been offered continuously for ConfirmAfter, or
// an operator calls Confirm. Only the latest held update is remembered; an
// update that differs replaces it and restarts its clock, and one within the
// fraction applies and clears the hold.
//
// Work per Offer is O(len(current)+len(next)) with one map. A Guard is safe
// for concurrent use (one mutex; Offer from the source, Confirm and Held from
// the admin API). A Feed does not use a Guard: it keeps the same state under
// its own mutex (feed.go).

// DefaultMaxDropFraction and DefaultConfirmAfter are GuardOptions' defaults.
const (
	DefaultMaxDropFraction = 0.5
	DefaultConfirmAfter    = 30 * time.Second
)

// GuardOptions configure a Guard. The zero value means every default.
type GuardOptions struct {
	// MaxDropFraction is the largest share (0..1] of active weight an update
	// may drain or remove and still apply at once. 0 means
	// DefaultMaxDropFraction (0.5); 1.0 turns the guard off.
	MaxDropFraction float64
	// ConfirmAfter is how long a held update must keep being offered
	// before it applies by itself. 0 means DefaultConfirmAfter (30s).
	ConfirmAfter time.Duration
}

func (o GuardOptions) resolve() GuardOptions {
	if o.MaxDropFraction == 0 {
		o.MaxDropFraction = DefaultMaxDropFraction
	}
	if o.ConfirmAfter == 0 {
		o.ConfirmAfter = DefaultConfirmAfter
	}
	return o
}

// Validate reports whether o is usable: MaxDropFraction in [0, 1] (0 being
// the default) and ConfirmAfter ≥ 0.
func (o GuardOptions) Validate() error {
	if !(o.MaxDropFraction >= 0 && o.MaxDropFraction <= 1) {
		return fmt.Errorf("max_drop_fraction must be from 0 to 1, got %v", o.MaxDropFraction)
	}
	if o.ConfirmAfter < 0 {
		return fmt.Errorf("confirm_after must be 0 (default) or more, got %v", o.ConfirmAfter)
	}
	return nil
}

// Action is what a Guard decided.
type Action uint8

const (
	// Apply: serve Decision.Instances now.
	Apply Action = iota
	// Hold: keep serving the current list; the update is remembered.
	Hold
)

// String returns "apply" or "hold", usable as a metric label.
func (a Action) String() string {
	if a == Hold {
		return "hold"
	}
	return "apply"
}

// Decision is a Guard's answer.
type Decision struct {
	Action Action
	// Instances is the list to serve when Action is Apply; nil on Hold.
	Instances []Instance
	// DropFraction is the update's share of current's active weight that it
	// drains or removes, 0..1.
	DropFraction float64
	// Since is when the held update was first offered: on Hold, and on an
	// Apply that releases a held update; zero for an immediate Apply.
	Since time.Time
	// HeldFor is now − Since when Since is set, else 0.
	HeldFor time.Duration
}

// Held is the update a Guard is holding back, for the admin API.
type Held struct {
	Instances    []Instance
	Since        time.Time
	DropFraction float64
}

// Guard holds back updates that drop too much capacity at once. The zero
// value uses the default options. Slices passed in are retained (the held
// update) and must not be mutated afterwards; Instances are compared by
// their Address strings exactly, which the parsers make canonical.
type Guard struct {
	mu struct {
		sync.Mutex
		core guardCore
	}
}

// guardCore is the delta guard's state and decisions without a lock: a
// Guard wraps it in its own mutex, and a Feed keeps it under the feed's
// mutex so that a decision and the set it is made against change together
// (one lock for feed and guard).
type guardCore struct {
	opts GuardOptions
	held *Held
}

// NewGuard validates o and returns a Guard.
func NewGuard(o GuardOptions) (*Guard, error) {
	c, err := newGuardCore(o)
	if err != nil {
		return nil, err
	}
	g := &Guard{}
	g.mu.core = c
	return g, nil
}

func newGuardCore(o GuardOptions) (guardCore, error) {
	if err := o.Validate(); err != nil {
		return guardCore{}, fmt.Errorf("discovery guard: %w", err)
	}
	return guardCore{opts: o}, nil
}

// Offer decides whether next may replace current at time now. It never
// blocks beyond the Guard's own mutex.
func (g *Guard) Offer(current, next []Instance, now time.Time) Decision {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.core.offer(current, next, now)
}

// Confirm releases the held update on an operator's word: it returns an
// Apply decision for it and forgets it, or ok false when nothing is held.
func (g *Guard) Confirm(now time.Time) (d Decision, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.core.confirm(now)
}

// Held returns the update being held back, if any.
func (g *Guard) Held() (Held, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.core.heldNow()
}

func (c *guardCore) offer(current, next []Instance, now time.Time) Decision {
	o := c.opts.resolve()
	drop := DropFraction(current, next)
	if drop <= o.MaxDropFraction {
		c.held = nil
		return Decision{Action: Apply, Instances: next, DropFraction: drop}
	}
	h := c.held
	if h == nil || !Identical(h.Instances, next) {
		c.held = &Held{Instances: next, Since: now, DropFraction: drop}
		return Decision{Action: Hold, DropFraction: drop, Since: now}
	}
	// The same update again: keep its clock, remember its latest form
	// (zone or metadata may differ), release it once it has persisted.
	h.Instances, h.DropFraction = next, drop
	if !now.Before(h.Since.Add(o.ConfirmAfter)) {
		c.held = nil
		return Decision{Action: Apply, Instances: next, DropFraction: drop, Since: h.Since, HeldFor: now.Sub(h.Since)}
	}
	return Decision{Action: Hold, DropFraction: drop, Since: h.Since, HeldFor: now.Sub(h.Since)}
}

func (c *guardCore) confirm(now time.Time) (Decision, bool) {
	h := c.held
	if h == nil {
		return Decision{}, false
	}
	c.held = nil
	return Decision{Action: Apply, Instances: h.Instances, DropFraction: h.DropFraction, Since: h.Since, HeldFor: now.Sub(h.Since)}, true
}

func (c *guardCore) heldNow() (Held, bool) {
	if c.held == nil {
		return Held{}, false
	}
	return *c.held, true
}

// DropFraction is the share of current's active weight that next drains or
// removes (the formula is at the head of this file): 0 when current has no
// active weight.
func DropFraction(current, next []Instance) float64 {
	cur := weights(current) // a repeated address counts once, its last weight
	var total uint64
	for _, w := range cur {
		total += uint64(w)
	}
	if total == 0 {
		return 0
	}
	kept := make(map[string]struct{}, len(next))
	for _, in := range next {
		if in.Weight > 0 {
			kept[in.Address] = struct{}{}
		}
	}
	var dropped uint64
	for addr, w := range cur {
		if _, ok := kept[addr]; !ok && w > 0 {
			dropped += uint64(w)
		}
	}
	return float64(dropped) / float64(total)
}

// Identical reports whether a and b hold the same set of address → weight
// pairs: order, zone and metadata are ignored, and so is a repeated pair.
// Two lists that would be served identically by a picker are identical.
func Identical(a, b []Instance) bool {
	ma := weights(a)
	mb := weights(b)
	if len(ma) != len(mb) {
		return false
	}
	for addr, w := range ma {
		if wb, ok := mb[addr]; !ok || wb != w {
			return false
		}
	}
	return true
}

func weights(list []Instance) map[string]uint32 {
	m := make(map[string]uint32, len(list))
	for _, in := range list {
		m[in.Address] = in.Weight
	}
	return m
}
