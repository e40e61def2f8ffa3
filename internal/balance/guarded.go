package balance

// Guarded: the last line of defence around a picker.
//
// WHAT IT CATCHES. A Picker that panics, or that returns something outside
// its contract: a nil endpoint without ErrNoEndpoint, an endpoint together
// with an error, or a drained endpoint (weight 0). The request then goes to
// a uniform choice among the live endpoints of the fallback set (the last
// good set the gateway had), and onFallback is called once, so the gateway
// can count levee_picker_fallbacks_total{upstream}. A legitimate
// ErrNoEndpoint (nil, ErrNoEndpoint) passes through unchanged: a set that is
// all drained on purpose must answer 503, not be overridden by an older set.
//
// WHAT IT CANNOT CATCH. A picker that never returns. There is no timer
// racing Pick: every picker in this package bounds its work by construction
// (each header states the bound) and the property and fuzz tests check that
// it returns for any weights; a timer per pick would cost more than the pick.
// Nor can recover stop a fatal runtime error (out of memory, concurrent map
// writes), which ends the process.
//
// WORK. One deferred recover (open-coded by the compiler: no allocation on
// the happy path, checked by TestGuardedHappyPathDoesNotAllocate) plus the
// wrapped Pick. A fallback costs one random number and one load.
//
// LOCKING. None: the fallback set is copied at construction and never
// written; onFallback must be safe for concurrent use.

import (
	"errors"
	"math/rand/v2"

	"github.com/levee-gw/levee/internal/endpoint"
)

// KeyPicker is a picker that maps a request key to an endpoint, such as
// ConsistentHash. PickKey has Pick's contract.
type KeyPicker interface {
	PickKey(key uint64) (*endpoint.Endpoint, error)
}

// Guarded returns a Picker that calls p.Pick and, if p panics or returns an
// endpoint that is nil or drained (or anything else outside the Picker
// contract), picks uniformly among the live (non-nil, weight > 0) endpoints
// of fallback instead and calls onFallback (if non-nil). The result
// returns ErrNoEndpoint when p does so legitimately, or when p failed and
// fallback has no live endpoint. It copies fallback and neither keeps nor
// modifies the slice.
//
// The result also implements KeyPicker: PickKey calls p.PickKey when p is a
// KeyPicker (else p.Pick), and its fallback choice depends only on the key,
// so a key sticks to one fallback endpoint while the fallback lasts.
//
// The result is safe for concurrent use if p and onFallback are; on the
// happy path it adds no allocation and no lock to p's.
func Guarded(p Picker, fallback []*endpoint.Endpoint, onFallback func()) Picker {
	live, _ := liveSet(fallback, maxWeight)
	g := &guarded{p: p, fallback: live, onFallback: onFallback}
	g.kp, _ = p.(KeyPicker)
	return g
}

type guarded struct {
	p          Picker
	kp         KeyPicker // p as a KeyPicker, or nil
	fallback   []*endpoint.Endpoint
	onFallback func()
}

// valid reports whether (e, err) is inside the Picker contract.
func valid(e *endpoint.Endpoint, err error) bool {
	if err == nil {
		return e != nil && e.Weight > 0
	}
	return e == nil && errors.Is(err, ErrNoEndpoint)
}

func (g *guarded) Pick() (*endpoint.Endpoint, error) {
	if e, err, ok := g.try(0, false); ok && valid(e, err) {
		return e, err
	}
	return g.fall(rand.Uint64())
}

func (g *guarded) PickKey(key uint64) (*endpoint.Endpoint, error) {
	if e, err, ok := g.try(key, true); ok && valid(e, err) {
		return e, err
	}
	return g.fall(mix64(key))
}

// try calls the wrapped picker; ok is false if it panicked.
func (g *guarded) try(key uint64, keyed bool) (e *endpoint.Endpoint, err error, ok bool) {
	defer func() {
		if recover() != nil {
			e, err, ok = nil, nil, false
		}
	}()
	if keyed && g.kp != nil {
		e, err = g.kp.PickKey(key)
	} else {
		e, err = g.p.Pick()
	}
	return e, err, true
}

// fall counts a fallback and picks the live fallback endpoint that the
// uniform 64-bit value r maps to.
func (g *guarded) fall(r uint64) (*endpoint.Endpoint, error) {
	if g.onFallback != nil {
		g.onFallback()
	}
	if len(g.fallback) == 0 {
		return nil, ErrNoEndpoint
	}
	i, _ := uniform(r, uint64(len(g.fallback)))
	return g.fallback[i], nil
}
