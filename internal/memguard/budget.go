package memguard

// The budget: every byte an admitted request will hold beyond the fixed
// per-connection and per-request buffers (a replay copy of its body, a
// buffered body) is reserved here before it is read, and released when
// the request ends. A reservation fits while the live heap at the last
// sample, plus every outstanding reservation, plus the new one stays under
// the ceiling of the request's class:
//
//	sheddable: the soft watermark
//	normal:    the hard watermark
//	critical:  halfway between the hard watermark and the limit
//
// so a storm of normal uploads cannot take the room critical work needs,
// and nothing reserved ever reaches the limit itself (the rest is the
// garbage collector's headroom). Bytes that are reserved and already
// allocated are counted twice until they are released (once in the live
// heap, once as a reservation): the error is on the safe side, and it
// ends with the request.
//
// Reserve is a compare-and-swap loop on one counter; no lock, no
// allocation.

// Class is how far a reservation may go; the request path maps its
// priorities onto it.
type Class uint8

const (
	// ClassNormal: up to the hard watermark.
	ClassNormal Class = iota
	// ClassCritical: up to halfway between the hard watermark and Limit.
	ClassCritical
	// ClassSheddable: up to the soft watermark.
	ClassSheddable
	classes
)

func ceilings(limit int64, soft, hard uint64) [classes]int64 {
	var c [classes]int64
	c[ClassSheddable] = int64(soft)
	c[ClassNormal] = int64(hard)
	c[ClassCritical] = int64(hard) + (limit-int64(hard))/2
	return c
}

// Reserve takes n bytes from the budget for a request of class c, and
// reports whether they fit. Every successful Reserve must be matched by a
// Release of the same n once the bytes are no longer held. n <= 0 always
// fits and reserves nothing.
func (g *Guard) Reserve(n int64, c Class) bool {
	if n <= 0 {
		return true
	}
	if c >= classes {
		c = ClassSheddable
	}
	limit := g.ceiling[c] - int64(g.heapBytes.Load())
	for {
		cur := g.reserved.Load()
		if cur+n > limit {
			g.refused.Add(1)
			return false
		}
		if g.reserved.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// Release returns n bytes reserved by Reserve.
func (g *Guard) Release(n int64) {
	if n > 0 {
		g.reserved.Add(-n)
	}
}

// Reserved returns the bytes reserved now.
func (g *Guard) Reserved() int64 { return g.reserved.Load() }

// RefusedReservations returns how many reservations did not fit.
func (g *Guard) RefusedReservations() uint64 { return g.refused.Load() }

// Ceiling returns the most that live heap plus reservations may reach
// for a reservation of class c to fit.
func (g *Guard) Ceiling(c Class) int64 {
	if c >= classes {
		c = ClassSheddable
	}
	return g.ceiling[c]
}
